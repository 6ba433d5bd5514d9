"""The torch.compile backend "tilegrad": found through the package's entry point, equal to eager PyTorch on the
model families of conftest.py, compiling each graph once, passing its options through, compiling for the device
its tensors are on, and running a graph it cannot compile eagerly after one warning that names why."""

from __future__ import annotations

import warnings

import pytest
import torch

from tilegrad import api, metrics
from tilegrad.errors import BuildError, TilegradError
from tilegrad.torch_backend import EagerFallbackWarning, backend
from tilegrad.torch_partition import EagerOpsWarning

nn = torch.nn


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test starts without dynamo's caches (which keep at most a few graphs per function) or counters."""
    torch._dynamo.reset()
    metrics.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def compiles(monkeypatch):
    """The keyword options of every `tilegrad.compile` call the backend makes."""
    calls, real = [], api.compile

    def spy(model, example_inputs=None, **options):
        calls.append(options)
        return real(model, example_inputs, **options)

    monkeypatch.setattr(api, "compile", spy)
    return calls


def _run(opt, args):
    with torch.no_grad():
        return opt(*args)


def _assert_close(got, want):
    got, want = torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_backend_is_registered_by_entry_point():
    from torch._dynamo.backends.registry import lookup_backend

    assert lookup_backend("tilegrad") is backend


def test_model_matches_eager_and_compiles_once(torch_model, compiles):
    module, args = torch_model
    with torch.no_grad():
        want = module(*args)
    opt = torch.compile(module, backend="tilegrad")
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerFallbackWarning)
        for _ in range(3):
            _assert_close(_run(opt, args), want)
    assert len(compiles) == 1
    assert metrics.counters["torch_backend.compiled"] == 1


def test_options_are_passed_through(compiles):
    module = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval()
    x = torch.randn(2, 4)
    opt = torch.compile(module, backend="tilegrad", options={"db": None, "opt_level": 0})
    _assert_close(_run(opt, (x,)), module(x))
    assert compiles == [{"db": None, "opt_level": 0, "target": "cpu"}]


def test_unknown_options_and_modes_are_errors():
    gm = torch.fx.symbolic_trace(nn.ReLU())
    with pytest.raises(TilegradError, match=r"options \['max_autotune'\] are not tilegrad's"):
        backend(gm, [torch.randn(3)], options={"max_autotune": True})
    with pytest.raises(TilegradError, match="mode='max-autotune' is Inductor's"):
        backend(gm, [torch.randn(3)], mode="max-autotune")


def test_errors_outside_the_graph_are_raised(monkeypatch):
    def broken(*args, **kwargs):
        raise BuildError("cc: not found")

    monkeypatch.setattr(api, "compile", broken)
    with torch.no_grad(), pytest.raises(BuildError, match="cc: not found"):
        backend(torch.fx.symbolic_trace(nn.ReLU()), [torch.randn(3)])


class Bessel(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return torch.special.bessel_j0(self.linear(x)) + 1


def test_unsupported_op_runs_in_pytorch_between_native_segments_after_one_warning(compiles):
    """The Bessel function runs in PyTorch; the linear layer before it and the addition after it are compiled,
    each a native segment; one warning per graph names the op and the share compiled."""
    module, x = Bessel().eval(), torch.randn(2, 4)
    opt = torch.compile(module, backend="tilegrad")
    with pytest.warns(EagerOpsWarning, match=r"aten\.special_bessel_j0\.default at test_torch_backend\.py:\d+.*"
                      r"of \d+ nodes compiled .* in 2 native segment"):
        y = _run(opt, (x,))
    _assert_close(y, module(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerOpsWarning)  # one warning per graph, not per call
        for _ in range(2):
            _assert_close(_run(opt, (x,)), module(x))
    assert metrics.counters["torch_backend.compiled"] == 1 and len(compiles) == 3  # the graph, its 2 segments
    assert 0 < metrics.counters["torch_backend.nodes_compiled"] < metrics.counters["torch_backend.nodes"]


def test_graphs_needing_gradients_run_eagerly():
    module, x = nn.Linear(4, 2), torch.randn(3, 4)
    opt = torch.compile(module, backend="tilegrad")
    with pytest.warns(EagerFallbackWarning, match=r"torch\.no_grad\(\)"):
        y = opt(x)
    y.sum().backward()
    assert module.weight.grad is not None


def test_updated_weights_recompile(compiles):
    module, x = nn.Linear(4, 3).eval(), torch.randn(2, 4)
    opt = torch.compile(module, backend="tilegrad")
    _assert_close(_run(opt, (x,)), module(x))
    with torch.no_grad():
        module.weight.mul_(2)
    _assert_close(_run(opt, (x,)), module(x))
    _run(opt, (x,))
    assert len(compiles) == 2


def test_graph_breaks_compile_each_graph(compiles):
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)

        def forward(self, x):
            y = torch.relu(self.a(x))
            torch._dynamo.graph_break()
            return self.b(y)

    module, x = Broken().eval(), torch.randn(2, 4)
    opt = torch.compile(module, backend="tilegrad")
    for _ in range(2):
        _assert_close(_run(opt, (x,)), module(x))
    assert len(compiles) == 2


def _fake(*shape, device):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        return torch.empty(*shape, device=device)


def test_cuda_tensors_compile_for_the_cuda_target(monkeypatch):
    """The dispatch without a GPU: fake CUDA tensors (what dynamo traces with) make the backend ask for
    target="cuda", with CPU copies of the inputs and weights to export from."""
    calls = []

    def spy(model, example_inputs=None, **options):
        calls.append((options, [t.device.type for t in example_inputs],
                      [b.device.type for b in model.buffers()]))
        return object()

    monkeypatch.setattr(api, "compile", spy)
    gm = torch.fx.symbolic_trace(nn.Linear(4, 3).eval())
    weight = nn.Parameter(_fake(3, 4, device="cuda"))
    with torch.no_grad():
        compiled = backend(gm, [_fake(2, 4, device="cuda"), weight])
    assert calls == [({"target": "cuda"}, ["cpu"], ["cpu"])]
    assert compiled.device.type == "cuda"
    with torch.no_grad():
        backend(gm, [torch.randn(2, 4)])
    assert calls[-1][0] == {"target": "cpu"}


def test_graphs_on_several_devices_or_other_devices_run_eagerly():
    gm = torch.fx.symbolic_trace(nn.ReLU())
    with torch.no_grad(), pytest.warns(EagerFallbackWarning, match=r"several devices \(cpu, cuda\)"):
        assert backend(gm, [torch.randn(3), _fake(3, device="cuda")]).module is None
    with torch.no_grad(), pytest.warns(EagerFallbackWarning, match="on meta, where tilegrad has no target"):
        assert backend(gm, [torch.empty(3, device="meta")]).module is None


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_run_on_the_gpu_and_match_eager():
    module = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval().cuda()
    x = torch.randn(4, 16, device="cuda")
    opt = torch.compile(module, backend="tilegrad")
    got = _run(opt, (x,))
    assert got.device.type == "cuda"
    _assert_close(got, module(x))
    assert metrics.counters["torch_backend.compiled"] == 1


class SizeMixer(nn.Module):
    """A product, a reshape by the input's own batch size and a softmax: sizes that dynamo passes as inputs."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x):
        return torch.softmax(self.linear(x).reshape(x.shape[0], -1, 4), dim=-1)


def test_dynamic_shapes_compile_once_up_to_a_bound_then_again_beyond_it(compiles):
    module = SizeMixer().eval()
    opt = torch.compile(module, backend="tilegrad", dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerFallbackWarning)
        for shape in [(3, 5, 16), (4, 7, 16), (2, 63, 16)]:
            x = torch.randn(*shape)
            _assert_close(_run(opt, (x,)), module(x))
        assert len(compiles) == 1 and metrics.counters["torch_backend.compiled"] == 1
        x = torch.randn(3, 100, 16)  # beyond the first bound (64): compiled again for larger values
        _assert_close(_run(opt, (x,)), module(x))
    assert len(compiles) == 2 and metrics.counters["torch_backend.compiled"] == 2


def test_dynamic_shapes_are_bounded_a_factor_four_about_the_values_seen(compiles):
    """The bounds sit a factor four below and above the values compiled for (their geometric middle is where the
    schedules are chosen): a length of 40 admits 10 to 256; 5 compiles again, with the bounds widened down."""
    module = SizeMixer().eval()
    opt = torch.compile(module, backend="tilegrad", dynamic=True)
    for shape in [(8, 40, 16), (3, 12, 16), (8, 250, 16)]:
        x = torch.randn(*shape)
        _assert_close(_run(opt, (x,)), module(x))
    assert len(compiles) == 1
    x = torch.randn(3, 5, 16)
    _assert_close(_run(opt, (x,)), module(x))
    assert len(compiles) == 2


def test_a_second_shape_compiles_a_dynamic_module_not_an_eager_fallback(compiles):
    """Without dynamic=, dynamo recompiles with symbolic shapes when it sees a second shape: that graph is
    compiled with dynamic dimensions too, and a third shape compiles nothing."""
    module = SizeMixer().eval()
    opt = torch.compile(module, backend="tilegrad")
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerFallbackWarning)
        for shape in [(3, 5, 16), (4, 7, 16), (2, 9, 16)]:
            x = torch.randn(*shape)
            _assert_close(_run(opt, (x,)), module(x))
    assert len(compiles) == 2 and "dynamic" in compiles[1]
