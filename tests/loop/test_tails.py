"""Versioned tails: full tiles run without guards, partial ones keep them (clamped), empty ones are skipped, and
every kernel still computes the same numbers."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnxruntime as ort
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad import te
from tilegrad.kernel import build, lower_kernel
from tilegrad.loop.ir import Allocate, Buffer, For, IfThenElse, Kernel, Seq, Store, walk
from tilegrad.loop.tails import version_tails
from tilegrad.schedule import Schedule
from tilegrad.te import expr as E
from tilegrad.te.evaluate import evaluate
from tilegrad.schedule.defaults import default_schedule
from tilegrad.te import nn
from tilegrad.te.interpret import interpret
from tilegrad.te.nn.nchwc import conv2d_nchwc, depthwise_conv2d_nchwc


def _matmul(m: int, n: int, k: int):
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "r")
    return [a, b], te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")


def _tiled(m: int, n: int, k: int, mr: int, nr: int) -> Schedule:
    """A register tile mr x nr over C, accumulated in a local copy computed at the tile."""
    _, c = _matmul(m, n, k)
    sch = Schedule([c])
    local = sch.cache_write("C")
    i, j = sch.loops("C")
    i0, i1 = sch.split("C", i, mr)
    j0, j1 = sch.split("C", j, nr)
    sch.reorder("C", i0, j0, i1, j1)
    sch.vectorize("C", j1)
    sch.compute_at(local, "C", j0)
    li, lj, lk = sch.loops(local)
    sch.reorder(local, lk, li, lj)
    sch.vectorize(local, lj)
    return sch


def _full_tiles(stmt):
    """The program with every version taken on its full-tile side."""
    if isinstance(stmt, IfThenElse) and stmt.orelse is not None:
        return _full_tiles(stmt.then)
    if isinstance(stmt, IfThenElse):
        return dataclasses.replace(stmt, then=_full_tiles(stmt.then))
    if isinstance(stmt, Seq):
        return Seq(tuple(_full_tiles(x) for x in stmt.stmts))
    if isinstance(stmt, (For, Allocate)):
        return dataclasses.replace(stmt, body=_full_tiles(stmt.body))
    return stmt


def _guarded_stores(stmt) -> list[Store]:
    """Stores under some guard (an if without else)."""
    out = []
    for s in walk(stmt):
        if isinstance(s, IfThenElse) and s.orelse is None:
            out.extend(x for x in walk(s.then) if isinstance(x, Store))
    return out


def test_a_full_tile_runs_without_guards():
    kernel = version_tails(lower_kernel(_tiled(13, 20, 7, 4, 8)))
    versions = [s for s in walk(kernel.body) if isinstance(s, IfThenElse) and s.orelse is not None]
    assert versions, "the tiles that overshoot 13 rows and 20 columns are versioned"
    fast = _full_tiles(kernel.body)
    assert not [s for s in walk(fast) if isinstance(s, IfThenElse)], "the full tile tests nothing"
    assert not _guarded_stores(kernel.body), "partial tiles are clamped, not guarded element by element"


def test_the_last_partial_tile_runs_to_numbers():
    """Only the last tile of 13 rows by 4 (1 row) and of 20 columns by 8 (4) overshoots: its copy has the
    loop's last index put in, so its loops run to numbers, and no bound is read at run time."""
    kernel = version_tails(lower_kernel(_tiled(13, 20, 7, 4, 8)))
    extents = {s.extent for s in walk(kernel.body) if isinstance(s, For)}
    assert all(isinstance(e, E.Const) for e in extents)
    assert {E.Const(1, E.INDEX), E.Const(4, E.INDEX)} <= extents


def test_partial_tiles_of_a_bound_read_at_run_time_loop_to_it():
    """A bound that moves with an outer loop (p) may cut any tile: the partial copy loops to min(8, bound)."""
    out = Buffer("Y", (E.Const(40, E.INDEX),), "float32")
    p, o, i = E.Var("p", E.INDEX, 0, 1), E.Var("o", E.INDEX, 0, 2), E.Var("i", E.INDEX, 0, 7)
    guard = IfThenElse(o * 8 + i < p + 20, Store(out, (o * 8 + i,), E.Const(1.0, "float32")))
    nest = For(o, E.Const(3, E.INDEX), "serial", For(i, E.Const(8, E.INDEX), "serial", guard))
    kernel = version_tails(Kernel("k", (out,), For(p, E.Const(2, E.INDEX), "serial", nest)))
    clamped = [s for s in walk(kernel.body) if isinstance(s, For) and "min" in repr(s.extent).lower()]
    assert clamped


def test_dividing_tiles_are_left_as_they_are():
    kernel = lower_kernel(_tiled(16, 24, 7, 4, 8))
    assert version_tails(kernel) is kernel


def test_a_padding_copys_row_test_is_checked_once_per_row():
    """A padded input's copy tests each element's row and column: the row's test reads only the row loop, so the
    row is versioned on it (rows inside the input copied without it: gcc built a mask from it bit by bit), and
    the numbers stay the same."""
    x = te.placeholder((1, 2, 5, 6), name="X")
    w = te.placeholder((3, 2, 3, 3), name="W")
    y = nn.conv2d(x, w, padding=1)
    kernel = version_tails(lower_kernel(Schedule([y])))
    rows = [s for s in walk(kernel.body) if isinstance(s, IfThenElse) and s.orelse is not None
            and {v.name for v in E.free_vars(s.cond)} == {"i2"}]
    assert rows
    inside = [s for s in walk(rows[0].then) if isinstance(s, Store)]
    assert inside and all("i2" not in {v.name for v in E.free_vars(e.cond)}
                          for st_ in inside for e in _subexpressions(st_.value) if type(e) is E.Select)
    rng = np.random.default_rng(1)
    xv, wv = rng.standard_normal((1, 2, 5, 6)).astype("float32"), rng.standard_normal((3, 2, 3, 3)).astype("float32")
    np.testing.assert_allclose(build(Schedule([y])).run(xv, wv), interpret([y], {"X": xv, "W": wv})[0],
                               rtol=1e-5, atol=1e-5)


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 23), n=st.integers(1, 37), k=st.integers(1, 9), mr=st.integers(1, 6),
       nr=st.sampled_from([1, 3, 4, 8, 16]))
def test_tiles_of_any_size_compute_the_product(m, n, k, mr, nr):
    sch = _tiled(m, n, k, mr, nr)
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    got = build(sch).run(a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 30), n=st.integers(1, 30), k=st.sampled_from([1, 8, 64]))
def test_default_batch_matmul_of_any_size(m, n, k):
    a = te.placeholder((2, m, k), name="A")
    b = te.placeholder((2, k, n), name="B")
    c = nn.batch_matmul(a, b)
    rng = np.random.default_rng(m * 100 + n)
    x = rng.standard_normal((2, m, k)).astype("float32")
    y = rng.standard_normal((2, k, n)).astype("float32")
    np.testing.assert_allclose(build(([a, b], [c])).run(x, y), x @ y, rtol=1e-4, atol=1e-4)


def test_a_test_under_loops_of_other_extents_keeps_its_guard():
    """Two nests whose inner loops share a name but not an extent: no one check per tile covers both."""
    out = Buffer("Y", (E.Const(10, E.INDEX),), "float32")
    o = E.Var("o", E.INDEX, 0, 2)

    def nest(extent: int) -> For:
        i = E.Var("i", E.INDEX, 0, extent - 1)
        guard = IfThenElse(o * 4 + i < 10, Store(out, (o * 4 + i,), E.Const(1.0, "float32")))
        return For(i, E.Const(extent, E.INDEX), "serial", guard)

    kernel = Kernel("k", (out,), For(o, E.Const(3, E.INDEX), "serial", Seq((nest(8), nest(4)))))
    versioned = version_tails(kernel)
    assert not [s for s in walk(versioned.body) if isinstance(s, IfThenElse) and s.orelse is not None]


def _window_model(op: str, c: int, size: int, k: int, stride: int, pad: int, dilation: int = 1):
    """A one-node ONNX model: a depthwise convolution (with its weights) or a pool, padded."""
    out = (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    inits, inputs = [], ["x"]
    if op == "Conv":
        w = np.random.default_rng(k).standard_normal((c, 1, k, k)).astype(np.float32)
        inits, inputs = [numpy_helper.from_array(w, "w")], ["x", "w"]
        attrs.update(group=c, dilations=[dilation, dilation])
    if op == "AveragePool":
        attrs.update(count_include_pad=0)
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, out, out])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_window_padding_is_tested_once_per_tile_and_row():
    """A depthwise convolution reading its input guarded in place (a select per tap) on a 37-wide map, whose
    last tile is partial: the interior tiles of the interior rows run without a select (gcc kept the guarded
    tile's accumulators on the stack and read with masked loads, 4x slower: docs/benchmarks.md, seventeenth
    session)."""
    x = te.placeholder((1, 2, 37, 37, 8), name="X")
    w = te.placeholder((2, 3, 3, 8), name="W")
    y = depthwise_conv2d_nchwc(x, w, padding=1)
    kernel = version_tails(lower_kernel(default_schedule([y])))
    fast = _full_tiles(kernel.body)
    stores = [s for s in walk(fast) if isinstance(s, Store)]
    assert stores and not any(type(e) is E.Select for s in stores for e in _subexpressions(s.value))


def _subexpressions(e):
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(x.children())


@settings(max_examples=10, deadline=None)
@given(op=st.sampled_from(["Conv", "MaxPool", "AveragePool"]), c=st.sampled_from([3, 8, 20]),
       size=st.integers(5, 41), k=st.sampled_from([3, 5]), stride=st.sampled_from([1, 2]),
       dilation=st.sampled_from([1, 2]))
def test_windows_padded_in_place_compute_what_onnxruntime_does(op, c, size, k, stride, dilation):
    """Depthwise convolutions and pools of any width (tiles dividing it or not) against ONNX Runtime."""
    dilation = dilation if op == "Conv" else 1
    model = _window_model(op, c, size, k, stride, pad=(k - 1) // 2 * dilation if op == "Conv" else k // 2,
                          dilation=dilation)
    x = np.random.default_rng(size).standard_normal((1, c, size, size)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(tilegrad.compile(model)(x), want, rtol=1e-4, atol=1e-5)


def _stored(stmt, env: dict, out: set) -> None:
    """The indices `stmt` stores to, run with the variables in `env` (For, Seq, IfThenElse, Store only)."""
    if isinstance(stmt, Seq):
        for x in stmt.stmts:
            _stored(x, env, out)
    elif isinstance(stmt, For):
        for value in range(evaluate(stmt.extent, env)):
            _stored(stmt.body, {**env, stmt.var.name: value}, out)
    elif isinstance(stmt, IfThenElse):
        if evaluate(stmt.cond, env):
            _stored(stmt.then, env, out)
        elif stmt.orelse is not None:
            _stored(stmt.orelse, env, out)
    elif isinstance(stmt, Store):
        out.add(evaluate(stmt.indices[0], env))


def test_tiles_over_a_dynamic_extent_run_as_whole_tiles_then_the_partial_one():
    """for o < ceil(n / 8): for i < 8: if (o * 8 + i < n) ...: versioned, then split where the whole-tile check
    first fails, so no check runs per tile; every n stores each index below it once."""
    n = E.Var("dyn_n", E.INDEX, 1, 100)
    out = Buffer("Y", (E.Const(100, E.INDEX),), "float32")
    o, i = E.Var("o", E.INDEX, 0, 12), E.Var("i", E.INDEX, 0, 7)
    guard = IfThenElse(o * 8 + i < n, Store(out, (o * 8 + i,), E.Const(1.0, "float32")))
    nest = For(o, (n + 7) // 8, "serial", For(i, E.Const(8, E.INDEX), "serial", guard))
    kernel = version_tails(Kernel("k", (out,), nest, dims=(n,)))
    assert isinstance(kernel.body, Seq) and [type(s) for s in kernel.body.stmts] == [For, For]
    whole, partial = kernel.body.stmts
    assert not [s for s in walk(whole) if isinstance(s, IfThenElse)], "whole tiles test nothing"
    for value in range(1, 101):
        assert evaluate(partial.extent, {"dyn_n": value}) == (value % 8 > 0)
        stored: set = set()
        _stored(kernel.body, {"dyn_n": value}, stored)
        assert stored == set(range(value))


@given(st.integers(1, 9), st.integers(-20, 20), st.integers(-30, 300), st.booleans())
def test_the_first_failing_index_of_a_tile_check(c, d, bound, strict):
    """`_first_failing(o * c + d < n)` (or <=) is the least o >= 0 where the check fails, for every n."""
    from tilegrad.loop.tails import _first_failing

    o, n = E.Var("o", E.INDEX, 0, 1000), E.Var("n", E.INDEX, -30, 300)
    cond = (o * c + d < n) if strict else (o * c + d <= n)
    first = _first_failing(cond, o)
    holds = (lambda v: v * c + d < bound) if strict else (lambda v: v * c + d <= bound)
    want = next(v for v in range(0, 1000) if not holds(v))
    assert max(0, evaluate(first, {"n": bound})) == want


def _tap_row_tests(kernel: Kernel) -> list[IfThenElse]:
    """The tests of a tap row loop's body that skip it (no else) in the versioned kernel."""
    return [s.body for s in walk(version_tails(kernel).body)
            if isinstance(s, For) and s.var.name.startswith("ry") and isinstance(s.body, IfThenElse)
            and s.body.orelse is None]


def test_a_dilated_windows_tap_rows_in_the_padding_are_skipped():
    """A dilated convolution's tap row that falls in the padding adds only zeros: its loop body runs under a test
    of the row (no else), without the select where it holds; an undilated window has no such test. The numbers
    equal the plain convolution's."""
    x, w = te.placeholder((1, 2, 9, 12, 8), name="X"), te.placeholder((2, 16, 3, 3, 8), name="W")
    dilated, plain = conv2d_nchwc(x, w, 1, 2, 2), conv2d_nchwc(x, w, 1, 1, 1)
    tests = _tap_row_tests(lower_kernel(([x, w], [dilated])))
    assert tests and not any(isinstance(s, Store) and type(s.value.b) is E.Select
                             for t in tests for s in walk(t.then))
    assert not _tap_row_tests(lower_kernel(([x, w], [plain])))
    xv, wv = (np.random.default_rng(0).standard_normal(t.shape).astype("float32") for t in (x, w))
    got = build(default_schedule(dilated), args=[x, w, dilated]).run(xv, wv)
    x4 = te.placeholder((1, 16, 9, 12), name="X4")
    w4 = te.placeholder((16, 16, 3, 3), name="W4")
    xs = xv.transpose(0, 1, 4, 2, 3).reshape(1, 16, 9, 12)
    ws = wv.transpose(0, 4, 1, 2, 3).reshape(16, 16, 3, 3)
    want = interpret(nn.conv2d(x4, w4, 1, 2, 2), {"X4": xs, "W4": ws})
    np.testing.assert_allclose(got.transpose(0, 1, 4, 2, 3).reshape(want.shape), want, rtol=1e-4, atol=1e-4)


def test_a_dilated_window_tests_no_tap_row_in_a_row_proven_inside_the_input():
    """The output rows whose every tap row lies in the input are versioned as such: there the tap row loop runs
    its body with neither the row's test nor a select, where the edge rows keep the test."""
    x, w = te.placeholder((1, 2, 12, 12, 8), name="X"), te.placeholder((2, 16, 3, 3, 8), name="W")
    kernel = version_tails(lower_kernel(([x, w], [conv2d_nchwc(x, w, 1, 2, 2)])))
    taps = [s for s in walk(kernel.body) if isinstance(s, For) and s.var.name.startswith("ry")]
    untested = [t for t in taps if not any(isinstance(s, IfThenElse) for s in walk(t.body))
                and not any(type(e) is E.Select for s in walk(t.body) if isinstance(s, Store)
                            for e in _subexpressions(s.value))]
    assert untested and len(untested) < len(taps)
