"""`compile(torch_module, example_inputs, dynamic=...)`: dimensions declared as torch.export's Dims stay dynamic
(one library for every length, matching eager PyTorch); a Dim without bounds or anything else is refused."""

import numpy as np
import pytest
import torch
from torch.export import Dim

import tilegrad
from tilegrad import metrics
from tilegrad.errors import KernelCallError, TilegradError


class Mixer(torch.nn.Module):
    """Rows of x[batch, seq, 16] mixed by a softmax over the sequence, then a product and a norm."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        weights = torch.softmax(x @ x.transpose(1, 2) / 4.0, dim=-1)
        return self.norm(self.proj(weights @ x) + x)


def test_torch_dims_compile_one_module_for_every_length():
    model = Mixer().eval()
    example = (torch.zeros(2, 8, 16),)
    module = tilegrad.compile(model, example, dynamic={"x": {0: Dim("batch", min=1, max=4),
                                                             1: Dim("seq", min=1, max=40)}})
    assert sorted(d.name for d in module.spec.dims) == ["batch", "seq"]
    module(np.zeros((1, 1, 16), np.float32))
    built = metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"]
    for batch, seq in [(1, 1), (2, 7), (4, 40), (3, 23)]:
        x = np.random.default_rng(seq).standard_normal((batch, seq, 16)).astype(np.float32)
        with torch.inference_mode():
            want = model(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(module(x), want, rtol=1e-4, atol=1e-5, err_msg=f"{batch} x {seq}")
    assert metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"] == built
    with pytest.raises(KernelCallError, match="'seq' is 41, outside the bounds"):
        module(np.zeros((1, 41, 16), np.float32))


@pytest.mark.parametrize("dynamic, match", [
    ({"x": {1: Dim("seq")}}, "Dim 'seq' has no max"),
    ({"x": {1: (1, 40)}}, "named torch.export Dims with bounds"),
    ({"x": None}, "names no Dim"),
])
def test_torch_dims_without_bounds_or_names_are_refused(dynamic, match):
    with pytest.raises(TilegradError, match=match):
        tilegrad.compile(Mixer().eval(), (torch.zeros(2, 8, 16),), dynamic=dynamic)
