"""The PyTorch frontend: modules captured with torch.export, compiled by `tilegrad.compile(module, example_inputs)`
and compared with eager PyTorch (the model families of conftest.py, then op coverage beyond them), and the errors:
unsupported ops listed at once with their source lines, data-dependent shapes, dtypes without native code."""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest
import torch

import tilegrad
from tilegrad.errors import TilegradError, UnsupportedFeatureError, UnsupportedOpError
from tilegrad.frontend.torch import import_torch
from tilegrad.torch_partition import EagerOpsWarning, PartitionedModule

nn = torch.nn
F = torch.nn.functional


def _flat(out) -> list[np.ndarray]:
    """The outputs in order (nested tuples and dicts flattened as torch.export flattens them), as arrays."""
    return [o.detach().numpy() if isinstance(o, torch.Tensor) else o for o in torch.utils._pytree.tree_leaves(out)]


def _check(module, args):
    """Compile `module` on `args` and compare every output with eager PyTorch's."""
    with torch.no_grad():
        want = _flat(module(*args))
    mod = tilegrad.compile(module, args)
    got = _flat(mod(*(a.numpy() for a in args)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return mod


def test_model_matches_eager(torch_model):
    module, args = torch_model
    mod = _check(module, args)
    assert mod.input_names == list(inspect.signature(module.forward).parameters)[:len(args)]


def test_parameters_and_buffers_become_constants():
    module = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).eval()
    g = import_torch(module, (torch.randn(2, 4),))
    assert [v.name for v in g.inputs] == ["input"]
    assert {v.shape for v in g.constants} >= {(3, 4), (3,)}


# ---- op coverage beyond the model families ----

class Elementwise(nn.Module):
    def forward(self, x, y):
        return (torch.rsqrt(x.abs() + 1), torch.log1p(x.abs()), torch.expm1(x), F.silu(x), F.hardswish(x),
                F.hardsigmoid(x), F.leaky_relu(x, 0.2), x.clamp(-0.5, 0.5), x.clamp(min=0.1), x.clamp(max=y),
                torch.where(x > y, x, y * 2), torch.maximum(x, y), torch.minimum(x, y), x ** 3, x.pow(2),
                torch.pow(2.0, x), torch.erf(x), 1 - x, x / 3, torch.sub(y, x, alpha=2), torch.add(x, y, alpha=0.5),
                F.gelu(x, approximate="tanh"), F.mish(x), F.relu6(x * 4), torch.sigmoid(x) * torch.tanh(y),
                F.softplus(x), torch.exp(x) - torch.log(y.abs() + 0.5), torch.reciprocal(y.abs() + 1), -x)


class Logic(nn.Module):
    def forward(self, x, ids):
        positive = x > 0
        return ((positive & (x < 1)).float(), (positive | (ids[:, :1] == 3)).float(), (positive ^ (x < -1)),
                ~positive, torch.logical_not(positive), (ids != 3).to(torch.float32), ids * 2 + 1, ids - ids.max(),
                x.masked_fill(ids == 1, -1.0), torch.where(positive, ids, 0), (x >= 0.5) == (x <= 0.75), ids > 2.5,
                (ids // 2).float() + x, torch.div(ids - 2, -3, rounding_mode="floor"))


class Reductions(nn.Module):
    def forward(self, x):
        values, indices = x.max(dim=2)
        return (x.sum(), x.mean((1, 2)), x.amax(-1), x.amin(1, keepdim=True), values, indices, x.argmax(-1),
                x.argmax(), x.var(-1), x.std(1), x.var(-1, unbiased=False), x.prod(-1), x.cumsum(2),
                F.softmax(x, 1), F.log_softmax(x, -1), x.sum(dim=(0, 3), keepdim=True), x.min())


class Shapes(nn.Module):
    def forward(self, x):
        idx = torch.tensor([0, 2])
        return (x.permute(0, 2, 3, 1).reshape(2, -1), x.transpose(1, 3), x.flatten(1), x.unsqueeze(1).squeeze(1),
                x[:, 1], x[:, :, 1:3, ::2], x[..., -1], torch.cat([x, x * 2], 1), x.split([1, 2], dim=1)[1],
                x.chunk(2, dim=3)[1], x.unbind(1)[2], x[:, :1].expand(2, 3, 4, 5), x.repeat(1, 2, 1, 1),
                x[0].repeat(2, 1, 1, 1), F.pad(x, (1, 2, 0, 1), value=0.5), x.index_select(2, idx), x[:, idx],
                torch.stack([x, x + 1], 0), x[0, 0].t(), torch.tril(x), torch.triu(x, 1), x.view(2, 3, 20).mT,
                torch.zeros_like(x) + x.new_ones(()), torch.full_like(x, 3.0) * x)


class Layers(nn.Module):
    def __init__(self):
        super().__init__()
        self.grouped = nn.Conv2d(4, 8, 3, padding=1, groups=2)
        self.dilated = nn.Conv2d(4, 4, 3, padding=2, dilation=2, bias=False)
        self.conv1d = nn.Conv1d(4, 6, 3, stride=2)
        self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.norm = nn.LayerNorm([9, 9])
        self.linear = nn.Linear(9, 5)

    def forward(self, x):
        seq = x.flatten(2)
        return (F.max_pool2d(x, 3, 2, 1, ceil_mode=True), F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                F.avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 3), F.adaptive_max_pool2d(x, 1),
                F.interpolate(x, scale_factor=2, mode="nearest"),
                F.interpolate(x, size=(12, 12), mode="bilinear", align_corners=False),
                F.interpolate(x, size=(5, 5), mode="bilinear", align_corners=True),
                self.grouped(x), self.dilated(x), self.conv1d(seq), F.max_pool1d(seq, 4), F.avg_pool1d(seq, 3),
                self.up(x), self.norm(x), self.linear(x[0, 0]), torch.addmm(x[0, 0], x[0, 1], x[0, 2], beta=0.5),
                torch.bmm(x[0], x[1]), F.normalize(x, dim=1))


@pytest.mark.parametrize("module, shapes", [
    (Elementwise(), ((3, 7), (3, 7))),
    (Logic(), ((4, 6), "ids")),
    (Reductions(), ((2, 3, 4, 5),)),
    (Shapes(), ((2, 3, 4, 5),)),
    (Layers(), ((2, 4, 9, 9),)),
], ids=["elementwise", "logic", "reductions", "shapes", "layers"])
def test_op_coverage(module, shapes):
    torch.manual_seed(0)
    args = tuple(torch.randint(0, 5, (4, 6)) if s == "ids" else torch.randn(s) for s in shapes)
    _check(module.eval(), args)


@pytest.mark.parametrize("shape, size", [((1, 3, 2, 2), 7), ((1, 2, 5, 9), (3, 4)), ((2, 3, 10), 4),
                                         ((1, 2, 6, 5, 7), (4, 5, 3))], ids=["2x2-to-7x7", "5x9-to-3x4", "1d", "3d"])
def test_adaptive_average_pooling_with_windows_of_unequal_size(shape, size):
    """VGG's classifier pools its last feature map to 7x7 whatever its size: windows overlap and differ."""
    pool = {3: F.adaptive_avg_pool1d, 4: F.adaptive_avg_pool2d, 5: F.adaptive_avg_pool3d}[len(shape)]

    class Pool(nn.Module):
        def forward(self, x):
            return pool(x, size)

    torch.manual_seed(0)
    _check(Pool(), (torch.randn(shape),))


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_eager(affine):
    """nn.GroupNorm (PoolFormer, BiT, Wav2Vec2's feature extractor), with and without its scale and shift."""
    torch.manual_seed(0)
    norm = nn.GroupNorm(3, 6, affine=affine)
    if affine:
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_()
    _check(norm.eval(), (torch.randn(2, 6, 5, 7) * 3 + 1,))
    _check(nn.GroupNorm(2, 4).eval(), (torch.randn(1, 4, 16),))


def test_gather_along_an_axis_matches_eager():
    """torch.gather (RoBERTa's position ids): an index per output element, index shorter than the data on
    another axis."""
    class Gather(nn.Module):
        def forward(self, x, index):
            return torch.gather(x, 1, index), torch.gather(x, -1, index[:, :2].transpose(0, 1)[:2])

    torch.manual_seed(0)
    _check(Gather(), (torch.randn(3, 5), torch.randint(0, 5, (3, 4))))


def test_indexing_with_several_index_tensors_matches_eager():
    """Advanced indexing with broadcast integer index tensors: leading, in the middle (the broadcast dimensions
    take the indexed axes' place), split by a slice (they go first), negative indices, and the vmapped
    `mask[batch, kv]` lookup of transformers' padding masks (DistilBERT)."""
    class Index(nn.Module):
        def forward(self, x, rows, cols, mask):
            b = torch.arange(mask.shape[0]).view(-1, 1, 1, 1)
            kv = torch.arange(mask.shape[1]).view(1, 1, 1, -1)
            return x[rows, cols], x[:, rows, cols], x[rows, :, cols], x[:, :, cols[:2], cols[1:3]], mask[b, kv]

    torch.manual_seed(0)
    rows, cols = torch.tensor([[0], [2], [-1]]), torch.tensor([1, 3, 0, -2])
    _check(Index(), (torch.randn(3, 4, 5, 6), rows, cols, torch.randint(0, 2, (2, 7))))


def test_ops_tilegrad_does_not_lower_run_in_pytorch_between_native_segments():
    """A median (two outputs, one used natively after it, one returned) and a cumulative product: the linear
    layers and the arithmetic around them compile into native segments, the two ops run in PyTorch, and the
    module answers like a compiled one (NumPy in, named outputs, NumPy out) but refuses to be saved."""
    class Partly(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 3)

        def forward(self, x):
            h = torch.relu(self.a(x))
            m = h.median(1)
            return self.b(torch.cumprod(h, 1) + m.values[:, None]) * 2, m.indices

    torch.manual_seed(0)
    module, x = Partly().eval(), torch.randn(4, 6)
    with pytest.warns(EagerOpsWarning, match=r"aten\.median\.dim at test_torch\.py:\d+ in forward; "
                      r"aten\.cumprod\.default at .*; 6 of 10 nodes compiled \(60%\) in 2 native segment"):
        mod = tilegrad.compile(module, (x,))
    assert isinstance(mod, PartitionedModule) and len(mod.segments) == 2
    assert mod.input_names == ["x"] and mod.output_names == ["output_0", "output_1"]
    with torch.no_grad():
        want = module(x)
    for got in (mod(x.numpy()), mod(x=x.numpy())):
        np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[1], want[1].numpy())
    with pytest.raises(TilegradError, match=r"runs aten\.cumprod\.default, aten\.median\.dim in PyTorch"):
        mod.save("never")


def test_assigning_into_a_slice_matches_eager():
    """`y[:, a:b] = src` on a copy is slice_scatter in the exported graph (Funnel's relative attention)."""
    class Assign(nn.Module):
        def forward(self, x, src):
            y = x.clone()
            y[:, 2:5] = src
            z = x.clone()
            z[..., -3:] = x[..., :3] * 0.5
            w = x.clone()
            w[:, :3] = src[:, :3]
            return y * 2, z + 1, w - 1

    torch.manual_seed(0)
    _check(Assign(), (torch.randn(2, 6, 4), torch.randn(2, 3, 4)))


@pytest.mark.parametrize("shape, options", [
    ((1, 8, 12, 1), {"kernel_size": (9, 1), "padding": (4, 0)}),                 # ConvBERT's span convolution
    ((2, 3, 7, 9), {"kernel_size": 3, "dilation": (1, 2), "padding": 1, "stride": (2, 1)}),
    ((3, 6, 5), {"kernel_size": 2}),
], ids=["convbert", "strided-dilated", "unbatched"])
def test_unfold_matches_eager(shape, options):
    class Unfold(nn.Module):
        def forward(self, x):
            return F.unfold(x, **options) * 2

    torch.manual_seed(0)
    _check(Unfold(), (torch.randn(shape),))


def test_outputs_that_are_inputs_constants_or_repeated():
    class Aliases(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.arange(6.0).reshape(2, 3))

        def forward(self, x):
            y = x * 2
            return x, y, y, self.table, {"sum": y + self.table}

    _check(Aliases().eval(), (torch.randn(2, 3),))


# ---- errors ----

class Bessel(nn.Module):
    def forward(self, x):
        return torch.special.bessel_j0(x)


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Bessel()

    def forward(self, x):
        y = torch.lgamma(self.inner(x))
        return torch.special.bessel_j0(y) + 1


def test_unsupported_ops_are_listed_at_once_with_their_source_lines():
    with pytest.raises(UnsupportedOpError) as info:  # (tilegrad.compile runs them in PyTorch, warning the same)
        import_torch(Unsupported(), (torch.randn(3, 4),))
    message = str(info.value)
    assert message.startswith("2 op(s) not supported:")
    bessel_line = inspect.getsourcelines(Bessel.forward)[1] + 1
    lgamma_line = inspect.getsourcelines(Unsupported.forward)[1] + 1
    assert f"aten.special_bessel_j0.default at test_torch.py:{bessel_line} in forward [inner: Bessel]" in message
    assert f"test_torch.py:{lgamma_line + 1} in forward" in message  # the second use, after the lgamma
    assert f"aten.lgamma.default at test_torch.py:{lgamma_line} in forward" in message


def test_data_dependent_shapes_are_refused():
    class Masked(nn.Module):
        def forward(self, x):
            return x[x > 0] * 2

    class Branching(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(UnsupportedFeatureError, match=r"data-dependent shape: aten\.index\.Tensor gives shape \[u0\]"):
        tilegrad.compile(Masked(), (torch.randn(4, 5),))
    with pytest.raises(UnsupportedFeatureError, match="depend on tensor values"):
        tilegrad.compile(Branching(), (torch.randn(4, 5),))


def test_unsupported_dtypes_are_refused():
    class Brain(nn.Module):
        def forward(self, x):
            return (x.bfloat16() * 2).float()

    with pytest.raises(UnsupportedFeatureError, match=r"input 'x' has dtype bfloat16.*\.float\(\)"):
        tilegrad.compile(Brain(), (torch.randn(3, dtype=torch.bfloat16),))
    with pytest.raises(UnsupportedFeatureError, match=r"_to_copy.* has dtype bfloat16"):
        tilegrad.compile(Brain(), (torch.randn(3),))
    with pytest.raises(UnsupportedFeatureError, match="complex64"):
        tilegrad.compile(nn.Identity(), (torch.randn(3, dtype=torch.complex64),))


def test_float64_and_int16_models_match_pytorch():
    """float64 keeps its digits (no float32 step); int16 arithmetic wraps and floor-divides as PyTorch's."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4), nn.Softmax(-1)).double()
    x = torch.randn(3, 8, dtype=torch.float64)
    got = tilegrad.compile(mlp.eval(), (x,))(x.numpy())
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, mlp(x).detach().numpy(), rtol=1e-13, atol=1e-15)

    class Ints(nn.Module):
        def forward(self, a, b):
            return (a * b + a) // 3, a < b

    a, b = (torch.randint(-300, 300, (4, 5), dtype=torch.int16) for _ in range(2))
    for got, want in zip(tilegrad.compile(Ints(), (a, b))(a.numpy(), b.numpy()), Ints()(a, b)):
        np.testing.assert_array_equal(got, want.numpy())


def test_constants_of_other_dtypes_may_fold():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor([2.0, 3.0], dtype=torch.float64))

        def forward(self, x):
            return x * self.scale.float()

    _check(Scaled(), (torch.randn(3, 2),))


def test_training_mode_is_refused():
    with pytest.raises(UnsupportedFeatureError, match=r"call module\.eval\(\)"):
        tilegrad.compile(nn.BatchNorm1d(3).train(), (torch.randn(4, 3),))
    with pytest.raises(UnsupportedOpError, match=r"call module\.eval\(\)"):
        tilegrad.compile(nn.Dropout(0.5).train(), (torch.randn(4, 3),))


def test_compile_arguments_are_checked():
    with pytest.raises(TilegradError, match="needs example inputs"):
        tilegrad.compile(nn.ReLU())
    with pytest.raises(TilegradError, match="input_shapes applies to ONNX"):
        tilegrad.compile(nn.ReLU(), (torch.randn(2),), input_shapes={"x": (2,)})
    with pytest.raises(TilegradError, match="example_inputs applies to a torch.nn.Module"):
        tilegrad.compile("model.onnx", (torch.randn(2),))


def test_attention_matches_scaled_dot_product_attention():
    class Attention(nn.Module):
        def forward(self, q, k, v, keep, bias):
            return (F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
                    F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3),
                    F.scaled_dot_product_attention(q, k, v, is_causal=True))

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    keep = torch.rand(5, 5) > 0.3
    keep[:, 0] = True  # no row without a key to attend to
    _check(Attention(), (q, k, v, keep, torch.randn(2, 1, 5, 5) / math.sqrt(8)))


def test_location_names_the_line_and_submodule():
    with pytest.raises(UnsupportedOpError) as info:
        import_torch(nn.Sequential(nn.ReLU(), Bessel()), (torch.randn(2),))
    assert re.search(r"test_torch\.py:\d+ in forward \[1: Bessel\]", str(info.value))


def test_every_mapping_names_an_aten_op():
    from tilegrad.frontend.torch_op_table import KEPT, TORCH_OPS  # (filled by the reader, imported above)

    for key in [*TORCH_OPS, *KEPT]:
        packet, _, overload = key.partition(".")
        assert hasattr(torch.ops.aten, packet), key
        assert not overload or overload in getattr(torch.ops.aten, packet).overloads(), key
