"""A compiled Module at run time: concurrent calls from many threads, input checks that name the input and what
it expects, and inputs in any memory layout."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tilegrad.errors import KernelCallError
from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference


@pytest.fixture
def two_layers():
    """x -> tanh(x @ W1) -> @ W2: the first product and its tanh live in the workspace."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (96, 128))
    w1 = b.const((rng.standard_normal((128, 128)) / 12).astype("float32"), "w1")
    w2 = b.const((rng.standard_normal((128, 64)) / 12).astype("float32"), "w2")
    g = b.build(b.op("matmul", b.op("tanh", b.op("matmul", x, w1)), w2))
    return g, compile_graph(g)


def test_concurrent_calls_from_eight_threads_are_all_right(two_layers):
    g, mod = two_layers
    assert mod.spec.workspace_bytes > 0
    threads, calls, distinct = 8, 50, 5
    inputs = [[np.random.default_rng(100 * t + i).standard_normal((96, 128)).astype("float32")
               for i in range(distinct)] for t in range(threads)]
    expected = [[run_reference(g, [x])[0] for x in xs] for xs in inputs]
    start = threading.Barrier(threads)
    wrong: list[tuple[int, int, float]] = []

    def work(t: int) -> None:
        start.wait()
        for i in range(calls):
            got = mod(inputs[t][i % distinct])
            want = expected[t][i % distinct]
            if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                wrong.append((t, i, float(np.max(np.abs(got - want)))))

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not wrong, f"{len(wrong)} of {threads * calls} calls were wrong, e.g. (thread, call, error) {wrong[:3]}"


def test_inputs_in_any_layout_give_the_right_outputs(two_layers):
    g, mod = two_layers
    x = np.random.default_rng(1).standard_normal((96, 128)).astype("float32")
    want = run_reference(g, [x])[0]
    wide = np.zeros((96, 256), "float32")
    wide[:, ::2] = x
    read_only = x.copy()
    read_only.flags.writeable = False
    unaligned = np.frombuffer(b"\0" + x.tobytes(), dtype="float32", offset=1, count=x.size).reshape(x.shape)
    for layout in (np.asfortranarray(x), wide[:, ::2], np.ascontiguousarray(x.T).T, read_only, unaligned):
        np.testing.assert_allclose(mod(layout), want, rtol=1e-4, atol=1e-5)


@pytest.fixture
def two_inputs():
    b = GraphBuilder()
    x, y = b.input("x", (2, 3)), b.input("y", (2, 3), "int32")
    return compile_graph(b.build(b.op("add", x, b.op("cast", y, to="float32"))))


@pytest.mark.parametrize("call, message", [
    (lambda m, x, y: m(x.astype("float64"), y), r"input 'x' expects dtype float32, got float64; convert it"),
    (lambda m, x, y: m(x, y.astype("int64")), r"input 'y' expects dtype int32, got int64"),
    (lambda m, x, y: m(x[:1], y), r"input 'x' expects shape \(2, 3\), got \(1, 3\)$"),
    (lambda m, x, y: m(x.reshape(6), y), r"input 'x' expects shape \(2, 3\), got \(6,\) \(rank 1, expected rank 2\)"),
    (lambda m, x, y: m(x), r"missing input\(s\) \['y'\]; the model takes \['x', 'y'\]"),
    (lambda m, x, y: m(x, y, x), r"the model takes 2 input\(s\) \(x, y\), got 3 positional arguments"),
    (lambda m, x, y: m(x, y, z=x), r"the model has no input 'z'; its inputs are \['x', 'y'\]"),
    (lambda m, x, y: m(x, y, x=x), r"input 'x' given twice"),
])
def test_wrong_inputs_are_refused_by_name(two_inputs, call, message):
    x, y = np.ones((2, 3), "float32"), np.ones((2, 3), "int32")
    with pytest.raises(KernelCallError, match=message):
        call(two_inputs, x, y)
    np.testing.assert_array_equal(two_inputs(y=y, x=x), np.full((2, 3), 2, "float32"))


def test_small_kernels_between_shared_ones_run_on_one_thread_and_agree_with_the_reference():
    """A matmul the team shares, small element-wise kernels thread 0 runs alone, then a shared one again."""
    from tilegrad import config
    from tilegrad.codegen.entry import KernelCall

    rng = np.random.default_rng(2)
    b = GraphBuilder()
    x, h = b.input("x", (1, 256)), b.input("h", (1, 64))
    w = b.const((rng.standard_normal((256, 256)) / 16).astype("float32"), "w")
    u = b.const((rng.standard_normal((64, 256)) / 8).astype("float32"), "u")
    small = b.op("tanh", b.op("sigmoid", b.op("mul", h, h)))
    g = b.build(b.op("add", b.op("matmul", x, w), b.op("matmul", small, u)))
    calls = []
    real = KernelCall.__new__

    def recording(cls, *args, **kwargs):
        call = real(cls, *args, **kwargs)
        calls.append(call)
        return call

    with config.override(num_threads=2), pytest.MonkeyPatch.context() as mp:
        mp.setattr(KernelCall, "__new__", recording)
        mod = compile_graph(g)
    assert any(c.parallel for c in calls) and not all(c.parallel for c in calls)
    xs, hs = rng.standard_normal((1, 256)).astype("float32"), rng.standard_normal((1, 64)).astype("float32")
    for _ in range(3):
        np.testing.assert_allclose(mod(xs, hs), run_reference(g, [xs, hs])[0], rtol=1e-4, atol=1e-5)
