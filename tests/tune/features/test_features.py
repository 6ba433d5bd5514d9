"""Program features: formulas of a symbolic sketch, substituted, equal the features of the concrete program; the
features respond to the schedule as they should; a batch of assignments evaluates in one vectorised call."""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.loop import lower
from tilegrad.loop.ir import Store, walk
from tilegrad.schedule import Schedule, apply_trace
from tilegrad.te import expr as E
from tilegrad.te import nn
from tilegrad.te.evaluate import EVAL_NUMPY
from tilegrad.tune.features.extract import (BUFFER_SLOTS, FEATURE_NAMES, POSITIONS, STORE_SLOTS, aggregate, extract,
                                            features, program_vector, store_slots)
from tilegrad.tune.features.formulas import FeatureFormulas

from ...schedule.strategies import valid_schedules


def _var(name: str, hi: int, lo: int = 1) -> E.Var:
    return E.Var(name, E.INDEX, lo, hi)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclasses.dataclass(frozen=True)
class Sketch:
    make: Callable  # () -> output tensor(s), fresh each call
    trace: object
    draw: Callable  # hypothesis draw -> {name: int}

    def concrete(self, params: dict):
        return lower(apply_trace(self.make(), self.trace, params))


# -- sketches ---------------------------------------------------------------------------------------------------


def _matmul():
    a, b = te.placeholder((64, 48), "float32", "A"), te.placeholder((48, 40), "float32", "B")
    return nn.matmul(a, b, name="C")


@functools.cache
def matmul_sketch() -> Sketch:
    """Multi-level tiling with a cache-write accumulator at the fused parallel loop, vectorised copy-out and a
    symbolic auto-unroll budget on the accumulator."""
    ti1, ti2, ti3 = _var("tile_i_1", 64), _var("tile_i_2", 64), _var("tile_i_3", 64)
    tj1, tj2, tj3 = _var("tile_j_1", 40), _var("tile_j_2", 40), _var("tile_j_3", 40)
    tk, um = _var("tile_k", 48), _var("unroll_max", 512, 0)
    s = Schedule(_matmul())
    c = "C"
    cl = s.cache_write(c)
    i, j = s.loops(c)
    i0, i1 = s.split(c, i, ti1, exact=True)
    j0, j1 = s.split(c, j, tj1, exact=True)
    s.reorder(c, i0, j0, i1, j1)
    f = s.fuse(c, i0, j0)
    s.parallel(c, f)
    s.vectorize(c, j1)
    s.compute_at(cl, c, f)
    ii, jj, k = s.loops(cl)
    ii0, ii1 = s.split(cl, ii, ti2, exact=True)
    ii1, ii2 = s.split(cl, ii1, ti3, exact=True)
    jj0, jj1 = s.split(cl, jj, tj2, exact=True)
    jj1, jj2 = s.split(cl, jj1, tj3, exact=True)
    k0, k1 = s.split(cl, k, tk, exact=True)
    s.reorder(cl, ii0, jj0, k0, ii1, jj1, k1, ii2, jj2)
    s.auto_unroll(cl, um)

    def draw(d):
        t1, u1 = d(st.sampled_from(_divisors(64))), d(st.sampled_from(_divisors(40)))
        t2, u2 = d(st.sampled_from(_divisors(t1))), d(st.sampled_from(_divisors(u1)))
        return {"tile_i_1": t1, "tile_i_2": t2, "tile_i_3": d(st.sampled_from(_divisors(t2))),
                "tile_j_1": u1, "tile_j_2": u2, "tile_j_3": d(st.sampled_from(_divisors(u2))),
                "tile_k": d(st.sampled_from(_divisors(48))), "unroll_max": d(st.sampled_from([0, 16, 64, 512]))}

    return Sketch(_matmul, s.trace, draw)


def _conv():
    x, w = te.placeholder((1, 4, 14, 14), "float32", "X"), te.placeholder((8, 4, 3, 3), "float32", "W")
    return nn.conv2d(x, w, padding=1, name="Y")


@functools.cache
def conv_sketch() -> Sketch:
    """conv2d with the padding inlined (a guarded read), an accumulator at the output tile, vectorised columns."""
    tc, th, tw, trc = _var("tile_c", 8), _var("tile_h", 14), _var("tile_w", 14), _var("tile_rc", 4)
    s = Schedule(_conv())
    s.compute_inline("Y_pad")
    yl = s.cache_write("Y")
    n, c, h, w = s.loops("Y")
    c0, c1 = s.split("Y", c, tc, exact=True)
    h0, h1 = s.split("Y", h, th, exact=True)
    w0, w1 = s.split("Y", w, tw, exact=True)
    s.reorder("Y", n, c0, h0, w0, c1, h1, w1)
    f = s.fuse("Y", n, c0, h0)
    s.parallel("Y", f)
    s.vectorize("Y", w1)
    s.compute_at(yl, "Y", w0)
    ln, lc, lh, lw, rc, kh, kw = s.loops(yl)
    rc0, rc1 = s.split(yl, rc, trc, exact=True)
    s.reorder(yl, ln, rc0, kh, kw, rc1, lc, lh, lw)
    s.vectorize(yl, lw)

    def draw(d):
        return {"tile_c": d(st.sampled_from(_divisors(8))), "tile_h": d(st.sampled_from(_divisors(14))),
                "tile_w": d(st.sampled_from(_divisors(14))), "tile_rc": d(st.sampled_from(_divisors(4)))}

    return Sketch(_conv, s.trace, draw)


def _softmax():
    return nn.softmax(te.placeholder((4, 6, 40), "float32", "X"), name="Y")


@functools.cache
def softmax_sketch() -> Sketch:
    """softmax: the max reduction rfactored (vectorised partial maxima), the sum split by a variable, the
    output's rows fused and parallel, its columns split and vectorised."""
    te_, ts, ty, um = _var("tile_exp", 40), _var("tile_sum", 40), _var("tile_y", 40), _var("unroll_max", 64, 0)
    s = Schedule(_softmax())
    _, r1 = s.split("Y_max", "r2", 8)
    rf = s.rfactor("Y_max", r1)
    r2_1, i0, i1, r2_0 = s.loops(rf)
    s.reorder(rf, i0, i1, r2_0, r2_1)
    s.vectorize(rf, r2_1)
    e0, e1 = s.split("Y_exp", "i2", te_, exact=True)
    s.vectorize("Y_exp", e1)
    s.split("Y_expsum", "r2", ts, exact=True)
    s.auto_unroll("Y_expsum", um)
    f = s.fuse("Y", "i0", "i1")
    s.parallel("Y", f)
    y0, y1 = s.split("Y", "i2", ty, exact=True)
    s.vectorize("Y", y1)

    def draw(d):
        return {name: d(st.sampled_from(_divisors(40))) for name in ("tile_exp", "tile_sum", "tile_y")} | {
            "unroll_max": d(st.integers(0, 64))}

    return Sketch(_softmax, s.trace, draw)


def _chain():
    a, b = te.placeholder((4, 33), "float32", "A"), te.placeholder((33,), "float32", "B")
    return nn.gelu(nn.add(a, b, name="S"), name="Y")


@functools.cache
def chain_sketch() -> Sketch:
    """add + gelu inlined into one loop: fused, split for threads, split again for vectors."""
    tp, tv = _var("tile_par", 132), _var("tile_vec", 132)
    s = Schedule(_chain())
    s.compute_inline("S")
    f = s.fuse("Y", *s.loops("Y"))
    f0, f1 = s.split("Y", f, tp, exact=True)
    f1, f2 = s.split("Y", f1, tv, exact=True)
    s.parallel("Y", f0)
    s.vectorize("Y", f2)

    def draw(d):
        p = d(st.sampled_from(_divisors(132)))
        return {"tile_par": p, "tile_vec": d(st.sampled_from(_divisors(p)))}

    return Sketch(_chain, s.trace, draw)


SKETCHES = {"matmul": matmul_sketch, "conv2d": conv_sketch, "softmax_rfactor": softmax_sketch,
            "elementwise_chain": chain_sketch}


@functools.cache
def formulas(name: str) -> FeatureFormulas:
    sk = SKETCHES[name]()
    return FeatureFormulas(lower(apply_trace(sk.make(), sk.trace)))


# -- identity ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SKETCHES))
@settings(max_examples=12)
@given(data=st.data())
def test_substituted_formulas_equal_concrete_features(name, data):
    sk = SKETCHES[name]()
    params = sk.draw(data.draw)
    ff = formulas(name)
    got = ff.evaluate({k: np.array([v]) for k, v in params.items() if k in ff.variables})[0]
    want = features(sk.concrete(params))
    assert got.shape == want.shape
    bad = [(ff.stores[s], FEATURE_NAMES[f], got[s, f], want[s, f]) for s, f in np.argwhere(got != want)]
    assert not bad, f"{params}: {bad[:10]}"


def test_symbolic_features_are_formulas_of_the_variables():
    ff = formulas("matmul")
    assert set(ff.variables) == {"tile_i_1", "tile_i_2", "tile_i_3", "tile_j_1", "tile_j_2", "tile_j_3", "tile_k",
                                 "unroll_max"}
    rows = ff.rows
    assert any(type(e) is not E.Const for row in rows.rows for e in row)
    with pytest.raises(ValueError, match="FeatureFormulas"):
        rows.to_numpy()
    with pytest.raises(ValueError, match="no values"):
        ff.evaluate({"tile_k": np.array([1])})


# -- any valid schedule ----------------------------------------------------------------------------------------


def _conv_small():
    x, w = te.placeholder((1, 3, 7, 6), "float32", "X"), te.placeholder((4, 3, 3, 3), "float32", "W")
    return [nn.conv2d(x, w, padding=1, name="Y")]


def _rows_max():
    x = te.placeholder((10, 23), "float32", "A")
    return [nn.reduce_max(x, axis=1, name="M")]


COMPUTES = {"matmul": lambda: [_matmul()], "conv2d": _conv_small, "row_max": _rows_max, "chain": lambda: [_chain()]}


@pytest.mark.parametrize("compute", list(COMPUTES))
@settings(max_examples=8)
@given(data=st.data())
def test_rows_of_any_valid_schedule_are_consistent(compute, data):
    """Guards, non-divisible splits, inlining, cache reads, rfactor: one row per store, and the one-hot groups,
    loop products and slots hold together."""
    sch = data.draw(valid_schedules(COMPUTES[compute]))
    kernel = lower(sch.state)
    rows = extract(kernel)
    x = rows.to_numpy()
    assert x.shape[0] == sum(1 for s in walk(kernel.body) if isinstance(s, Store)) and np.isfinite(x).all()
    for r in x:
        f = dict(zip(FEATURE_NAMES, r))
        assert f["spatial_prod"] * f["reduce_prod"] == f["trip_count"]
        for short in ("vec", "unroll", "parallel"):
            assert sum(f[f"{short}_pos_{p}"] for p in POSITIONS) == 1
            assert (f[f"{short}_num"] == 0) == (f[f"{short}_pos_none"] == 1)
        for k in range(BUFFER_SLOTS):
            used = f[f"b{k}_acc_read"] + f[f"b{k}_acc_write"] + f[f"b{k}_acc_read_write"]
            assert used == f[f"b{k}_reuse_loop"] + f[f"b{k}_reuse_serial"] + f[f"b{k}_reuse_none"] <= 1
            if k:
                assert f[f"b{k}_bytes"] <= f[f"b{k - 1}_bytes"]
        assert f["output_written_once"] in (0, 1)


# -- features respond to the schedule ---------------------------------------------------------------------------


def _row(kernel_features, stores, name):
    return dict(zip(FEATURE_NAMES, kernel_features[stores.index(name)]))


def test_counts_of_a_tiny_matmul_by_hand():
    a, b = te.placeholder((4, 6), "float32", "A"), te.placeholder((6, 5), "float32", "B")
    c = nn.matmul(a, b, name="C")
    k = lower(Schedule(c).state)
    rows = extract(k)
    assert rows.stores == ("C", "C")  # the initialisation, then the update
    init, upd = (dict(zip(FEATURE_NAMES, r)) for r in rows.to_numpy())
    assert init["trip_count"] == 20 and init["num_loops"] == 2 and init["float_addsub"] == 0
    assert upd["trip_count"] == 120 and upd["num_loops"] == 3
    assert upd["float_addsub"] == 120 and upd["float_mul"] == 120 and upd["float_mad"] == 120
    assert upd["loads"] == 360  # C, A and B each iteration
    assert upd["spatial_prod"] == 20 and upd["reduce_prod"] == 6
    # C[i, j], A[i, k], B[k, j]: every index is a loop variable, no index arithmetic at all
    assert upd["int_addsub"] == 0 and upd["int_mul"] == 0
    # slots by bytes touched: C (read and written, 2 x 120 x 4 bytes) first, then A and B (480 each)
    assert upd["b0_acc_read_write"] == 1 and upd["b0_bytes"] == 960 and upd["b0_unique_bytes"] == 80
    assert upd["b1_acc_read"] == 1 and upd["b1_bytes"] == 480 and upd["b1_unique_bytes"] == 96
    # C[i, j] does not move along k: reused across the 6 iterations of k, at distance 1 iteration
    assert upd["b0_reuse_loop"] == 1 and upd["b0_reuse_ct"] == 6 and upd["b0_reuse_dis_iter"] == 1
    # A[i, k] does not move along j (5 iterations), reused every 6 iterations of the inner k loop
    assert upd["b1_reuse_loop"] == 1 and upd["b1_reuse_ct"] == 5 and upd["b1_reuse_dis_iter"] == 6
    assert upd["b1_stride"] == 1 and upd["b2_stride"] == 5  # A along k, B along k (a row of 5 down)
    assert upd["output_written_once"] == 0 and upd["is_output_store"] == 1 and upd["kernel_stores"] == 2
    assert upd["ai_1"] == pytest.approx(2 * 6 / (4 + 6 * 4 + 6 * 4))  # the k loop: C, a row of A, a column of B


def test_index_arithmetic_is_counted():
    a, b = te.placeholder((4, 6), "float32", "A"), te.placeholder((6, 5), "float32", "B")
    sch = Schedule(nn.matmul(a, b, name="C"))
    sch.split("C", "j", 5)  # j = j_0 * 5 + j_1 with j_0 of one iteration: still spelled in the index
    sch.split("C", "k", 2)  # k = k_0 * 2 + k_1 in A and B
    upd = features(lower(sch.state))[1]
    row = dict(zip(FEATURE_NAMES, upd))
    trips = 4 * 5 * 6
    # j_0 * 5 + j_1 in C (read and written) and in B, k_0 * 2 + k_1 in A and in B: as spelled in the loop IR
    assert row["int_mul"] == 5 * trips and row["int_addsub"] == 5 * trips and row["int_divmod"] == 0


def _matmul_features(vectorize: bool, tile: int = 8):
    sch = Schedule(_matmul())
    i0, i1 = sch.split("C", "i", tile)
    j0, j1 = sch.split("C", "j", 8)
    sch.reorder("C", i0, j0, "k", i1, j1)
    if vectorize:
        sch.vectorize("C", j1)
    sch.parallel("C", i0)
    k = lower(sch.state)
    return dict(zip(FEATURE_NAMES, features(k)[1]))


def test_vectorising_changes_the_vector_features():
    plain, vec = _matmul_features(False), _matmul_features(True)
    assert plain["vec_num"] == 0 and plain["vec_len"] == 0 and plain["vec_pos_none"] == 1
    assert vec["vec_num"] == 1 and vec["vec_len"] == 8 and vec["vec_prod"] == 8
    assert vec["vec_pos_inner_spatial"] == 1 and vec["vec_pos_none"] == 0
    assert vec["parallel_num"] == 1 and vec["parallel_len"] == 8 and vec["parallel_pos_outer_spatial"] == 1
    assert {k for k in plain if plain[k] != vec[k]} <= {k for k in FEATURE_NAMES if k.startswith("vec_")}


def test_a_bigger_tile_changes_footprints_and_reuse():
    small, big = _matmul_features(True, tile=4), _matmul_features(True, tile=16)
    # B[k, j] does not depend on i_1: reused across the tile's rows, so its reuse count is the tile height
    slot_b = next(k for k in range(5) if small[f"b{k}_acc_read"] and small[f"b{k}_stride"] == 1)
    assert small[f"b{slot_b}_reuse_ct"] == 4 and big[f"b{slot_b}_reuse_ct"] == 16
    assert big["ai_3"] > small["ai_3"]  # the tile's loops do more work per byte
    assert big["trip_count"] == small["trip_count"]


def test_unroll_condition_is_a_formula_of_the_budget():
    ff = formulas("matmul")
    base = {"tile_i_1": 8, "tile_i_2": 4, "tile_i_3": 2, "tile_j_1": 8, "tile_j_2": 8, "tile_j_3": 4,
            "tile_k": 4}
    out = ff.evaluate({**{k: np.array([v, v]) for k, v in base.items()}, "unroll_max": np.array([0, 512])})
    upd = ff.stores.index("C_local") + 1
    col = FEATURE_NAMES.index("unroll_num")
    assert out[0, upd, col] == 0 and out[1, upd, col] > 0


def test_output_written_once():
    x = te.placeholder((4, 33), "float32", "A")
    k = lower(Schedule(nn.relu(x, name="Y")).state)
    assert dict(zip(FEATURE_NAMES, features(k)[0]))["output_written_once"] == 1


def test_aggregate_is_log_of_sum_and_max():
    rows = np.array([[0.0, 0.0, -3.0], [3.0, 7.0, 0.0]])
    agg = aggregate(rows)
    np.testing.assert_allclose(agg, [2.0, 3.0, -2.0, 2.0, 3.0, 0.0])
    batch = aggregate(np.stack([rows, rows]))
    assert batch.shape == (2, 6)
    assert aggregate(np.zeros((0, 3))).shape == (6,)


def test_the_program_vector_is_the_aggregate_then_each_store_in_its_slot():
    rows = np.array([[0.0, 0.0, -3.0], [3.0, 7.0, 0.0]])
    vector = program_vector(rows)
    assert vector.shape == ((2 + STORE_SLOTS) * 3,)
    np.testing.assert_allclose(vector[:6], aggregate(rows))
    np.testing.assert_allclose(vector[6:12], [0.0, 0.0, -2.0, 2.0, 3.0, 0.0])  # each store's row, in order
    assert np.isnan(vector[12:]).all()  # the slots of stores the program lacks are missing
    many = np.ones((STORE_SLOTS + 2, 3))  # the stores from the last slot on are summed into it
    np.testing.assert_allclose(store_slots(many)[-1], np.log2(1.0 + 3.0))
    np.testing.assert_allclose(store_slots(many)[:-1], 1.0)
    np.testing.assert_array_equal(program_vector(np.stack([rows, rows]))[1], vector)


# -- batches ----------------------------------------------------------------------------------------------------


def test_a_batch_of_4096_assignments_in_one_call():
    ff = formulas("matmul")
    sk = SKETCHES["matmul"]()
    rng = np.random.default_rng(0)
    batch = 4096
    cols: dict[str, list[int]] = {v: [] for v in ff.variables}
    picks = []
    for _ in range(batch):
        t1, u1 = rng.choice(_divisors(64)), rng.choice(_divisors(40))
        t2, u2 = rng.choice(_divisors(t1)), rng.choice(_divisors(u1))
        p = {"tile_i_1": t1, "tile_i_2": t2, "tile_i_3": rng.choice(_divisors(t2)), "tile_j_1": u1,
             "tile_j_2": u2, "tile_j_3": rng.choice(_divisors(u2)), "tile_k": rng.choice(_divisors(48)),
             "unroll_max": rng.choice([0, 16, 64, 512])}
        picks.append(p)
        for v in ff.variables:
            cols[v].append(int(p[v]))
    out = ff.evaluate({v: np.array(c) for v, c in cols.items()})
    assert out.shape == (batch, len(ff.stores), len(FEATURE_NAMES)) and np.isfinite(out).all()
    for n in (0, 1234, batch - 1):
        np.testing.assert_array_equal(out[n], features(sk.concrete({k: int(v) for k, v in picks[n].items()})))
    assert ff.derive_seconds < 5  # a generous bound; benchmarks/features.py measures it (about 0.1 s)


def test_the_numpy_table_covers_every_node_of_the_formulas():
    """Each operator features.py builds formulas from has a NumPy call in the shared table; Var, Const and Cast are
    handled apart."""
    seen = set()
    for name in SKETCHES:
        stack = [e for row in formulas(name).rows.rows for e in row]
        while stack:
            e = stack.pop()
            if type(e) not in seen:
                seen.add(type(e))
                stack.extend(e.children())
            elif e.children():
                stack.extend(e.children())
    assert all(EVAL_NUMPY[cls] is not None for cls in seen - {E.Var, E.Const, E.Cast})
    assert {E.Select, E.FloorDiv, E.Div} <= seen


def test_variables_missing_from_the_list_are_named():
    sk = SKETCHES["elementwise_chain"]()
    with pytest.raises(ValueError, match="tile_vec"):
        FeatureFormulas(lower(apply_trace(sk.make(), sk.trace)), variables=["tile_par"])
