"""Sketches (schedule/sketch.py): the rules derive the expected structures for the computations they target, every
random annotation of every sketch is valid and gives NumPy's numbers, tile sizes are sampled uniformly over the
factorizations of each extent, and a sketch's traces survive JSON."""

from __future__ import annotations

import collections
import functools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.loop import format_kernel, lower
from tilegrad.schedule import Schedule, Trace, apply_trace
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.sketch import MAX_LOCATIONS, MAX_PARALLEL_GRAINS, UNROLL_STEPS, generate_sketches
from tilegrad.schedule.space import MAX_INNERMOST, Choice, Sketch, Tiling, divisors, factorizations
from tilegrad.te.interpret import interpret
from tilegrad.te.nn.attention import attention
from tilegrad.te.nn.nchwc import conv2d_nchwc
from tilegrad.workloads import WORKLOADS


def _conv2d_nchwc():
    """A convolution in the blocked layout: its input is padded in a stage of its own ("blocked_pad")."""
    x, w = te.placeholder((1, 4, 8, 8), "float32", "X"), te.placeholder((2, 4, 3, 3, 4), "float32", "W")
    return [x, w], conv2d_nchwc(x, w, padding=1, name="Y")


def _reduction_chain():
    """Two reductions feeding an element-wise output: each may be computed at a loop of its consumer, so the
    loops the first may choose from depend on where the second is computed."""
    x = te.placeholder((8, 6, 5), "float32", "X")
    k, m = te.reduce_axis(5, "k"), te.reduce_axis(6, "m")
    r1 = te.compute((8, 6), lambda i, j: te.sum(x[i, j, k], axis=[k]), name="R1")
    r2 = te.compute((8,), lambda i: te.sum(r1[i, m], axis=[m]), name="R2")
    return [x], te.compute((8,), lambda i: r2[i] * 2.0, name="Y")


def _long_sum():
    x = te.placeholder((3, 512), "float32", "X")
    k = te.reduce_axis(512, "k")
    return [x], te.compute((3,), lambda i: te.sum(x[i, k], axis=[k]), name="Y")


def _attention_heads_as_queries():
    """An attention written in (B, Lq, H, Dv) with as many heads as queries: its output has its `pv` stage's
    shape, but reads it with heads and queries swapped, so a fused tile of the output needs a tile of `pv` along
    the swapped axes."""
    q, k, v = (te.placeholder((1, 4, 4, 8), "float32", n) for n in "QKV")
    return [q, k, v], attention(q, k, v, out_layout="bshd", name="Y")


MAKERS = {**WORKLOADS, "conv2d_nchwc_pad": _conv2d_nchwc, "reduction_chain": _reduction_chain,
          "long_sum": _long_sum, "attention_heads_as_queries": _attention_heads_as_queries}


@functools.cache
def _sketches(name: str) -> dict[str, Sketch]:
    make = MAKERS[name]
    sketches = generate_sketches(lambda: [make()[1]])
    return {s.name: s for s in sketches}


@functools.cache
def _data(name: str):
    """Input arrays (index inputs hold valid indices: gather reads X (7, 5) along axis 0) and the reference."""
    inputs, output = MAKERS[name]()
    rng = np.random.default_rng(sum(map(ord, name)))
    arrays = {}
    for t in inputs:
        if t.dtype == "int64":
            arrays[t.name] = rng.integers(0, 7, size=t.shape).astype("int64")
        else:
            arrays[t.name] = rng.standard_normal(t.shape).astype(t.dtype)
    return arrays, interpret(output, arrays)


def _check(name: str, sketch: Sketch, params: dict) -> None:
    """`params` is valid, binds to a trace without variables, and that trace compiles to NumPy's numbers."""
    assert sketch.valid(params), (sketch.name, params)
    tr = sketch.bind(params)
    assert tr.variables() == [], f"{sketch.name} {params}: unbound {tr.variables()}"
    inputs, output = MAKERS[name]()
    state = apply_trace([output], tr)
    sch = Schedule([output])
    sch.state = state
    kern = build(sch, args=inputs + list(state.outputs))
    arrays, want = _data(name)
    got = kern.run(*[arrays[t.name] for t in inputs])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} {sketch.name}: {tr.to_json()}")


def _kinds(sketch: Sketch, params: dict) -> collections.Counter:
    return collections.Counter(step.kind for step in sketch.bind(params).steps)


def _tiled_stages(sketch: Sketch) -> set[str]:
    """Stages with an auto-unroll choice (every tiled stage has one)."""
    _, space = sketch.space({})
    return {c.var.removesuffix("_unroll") for c in space.choices}


# -- the rules ----------------------------------------------------------------------------------------------------


def test_matmul_gets_cache_write_and_in_place_tiling():
    sketches = _sketches("matmul_64x48x40")
    assert list(sketches) == ["default", "tile_cache_write", "tile"]
    cw, tile = sketches["tile_cache_write"], sketches["tile"]
    assert _kinds(cw, cw.sample(random.Random(0)))["cache_write"] == 1
    assert _kinds(tile, tile.sample(random.Random(0)))["cache_write"] == 0
    assert _tiled_stages(cw) == {"C_local"} and _tiled_stages(tile) == {"C"}
    # SSRSRS: spatial axes in four parts (three Vars), the reduction in two (one Var)
    _, space = tile.space({})
    assert [(t.extent, len(t.vars)) for t in space.tilings] == [(64, 3), (40, 3), (48, 1)]
    assert [c.var for c in tile.structural] == ["C_parallel"]


def test_batch_matmul_and_convolutions_are_tiled():
    for name in ["batch_matmul_3x17x12x9", "conv1d_c4_19_stride2", "conv2d_3x3_c4_14x14", "conv3d_c4_6x7x5",
                 "depthwise_conv2d_c8_stride2"]:
        assert list(_sketches(name)) == ["default", "tile_cache_write", "tile"], name


def test_dense_with_bias_tiles_the_matmul_inside_the_epilogue():
    sketches = _sketches("dense_5x24x10")
    fused = [s for n, s in sketches.items() if "tile_fused" in n]
    assert len(fused) == 1
    sketch = fused[0]
    assert "tile_cache_write" not in sketch.name
    tr = sketch.bind(sketch.sample(random.Random(1)))
    (at,) = [s for s in tr.steps if s.kind == "compute_at"]
    assert dict(at.args)["stage"] == "Y_matmul" and dict(at.args)["target"] == "Y"
    assert not any(s.kind == "cache_write" for s in tr.steps)
    assert _tiled_stages(sketch) == {"Y_matmul"}


def test_layer_norm_reductions_use_rfactor():
    sketch = next(s for n, s in _sketches("layernorm_6x64").items() if "rfactor" in n)
    widths = {c.var: c.values for c in sketch.structural if c.var.endswith("_rfactor")}
    assert set(widths) == {"Y_mean_rfactor", "Y_var_rfactor"}
    for values in widths.values():  # proper divisors of the reduction, above 1
        assert values == tuple(d for d in divisors(64) if 1 < d < 64)
    assert _kinds(sketch, sketch.sample(random.Random(2)))["rfactor"] == 2


def test_a_fused_tile_of_a_permuted_consumer_tiles_the_producer_along_the_swapped_axes():
    """Every location of the exp-sum, before the output's tiling splits its loop, lowers and gives NumPy's
    numbers; the output's tile splits `pv`'s heads by the tile of its own heads axis."""
    sketch = next(s for n, s in _sketches("attention_heads_as_queries").items() if "tile_fused" in n.split("+"))
    rng = random.Random(3)
    for at in sketch.space({})[1].structural[0].values:
        params = sketch.sample(rng, {"Y_expsum_at": at}) if "simple" in sketch.name else sketch.sample(rng)
        _check("attention_heads_as_queries", sketch, params)
        splits = {(a["stage"], a["loop"]): a["factor"] for a in (dict(s.args) for s in sketch.bind(params).steps
                                                                  if s.kind == "split")}
        assert splits[("Y_pv", "i1")] == params["Y_pv_i2_t3"] and splits[("Y_pv", "i2")] == params["Y_pv_i1_t3"]


def test_rfactor_only_for_a_long_reduction_over_a_small_output():
    assert list(_sketches("long_sum")) == ["default", "rfactor"]
    assert list(_sketches("reduce_max_rows")) == ["default", "simple"]  # a reduction of 37: too short


@pytest.mark.parametrize("name, inlined", [("add_gelu_4x33", {"S"}), ("broadcast_where", {"L", "G"})])
def test_element_wise_chains_are_simple_with_producers_inlined(name, inlined):
    sketches = _sketches(name)
    assert list(sketches) == ["default", "simple"]
    tr = sketches["simple"].bind(sketches["simple"].sample(random.Random(3)))
    assert {dict(s.args)["stage"] for s in tr.steps if s.kind == "compute_inline"} == inlined


def test_padded_stage_chooses_where_it_is_computed():
    sketches = _sketches("conv2d_nchwc_pad")
    assert list(sketches) == ["default", "tile_cache_write+simple", "tile+simple"]
    for sketch in list(sketches.values())[1:]:
        (at,) = [c for c in sketch.structural if c.var == "Y_pad_at"]
        inner = at.values[1:]  # the root, then the innermost few loops outside the tile
        assert at.values[0] == -1 and inner == tuple(range(inner[0], inner[0] + len(inner)))
        assert len(inner) == MAX_LOCATIONS
        for where in (-1, inner[0], inner[-1]):
            params = _sample_with(sketch, {"Y_pad_at": where}, random.Random(4))
            state = apply_trace([_conv2d_nchwc()[1]], sketch.bind(params))
            attach = state.stage("Y_pad").attach
            assert attach is None if where == -1 else attach[0] == "Y", (where, attach)


def test_padded_stage_is_computed_outside_a_cache_write_tile():
    """With cache_write, the accumulator tile (computed at a loop of the copy-out) reads the padded input, so the
    padding may go at the loops of the copy-out down to the tile's, not inside it."""
    sketch = _sketches("conv2d_nchwc_pad")["tile_cache_write+simple"]
    (at,) = [c for c in sketch.structural if c.var == "Y_pad_at"]
    rng = random.Random(5)
    state = apply_trace([_conv2d_nchwc()[1]], sketch.bind(_sample_with(sketch, {"Y_pad_at": at.values[-1]}, rng)))
    assert state.stage("Y_pad").attach == state.stage("Y_local").attach
    for where in at.values[-3:] + (-1,):
        _check("conv2d_nchwc_pad", sketch, _sample_with(sketch, {"Y_pad_at": where}, rng))


def _sample_with(sketch: Sketch, fixed: dict, rng: random.Random) -> dict:
    return sketch.sample(rng, fixed)


def test_structural_choices_depend_on_the_choices_before_them():
    """R1 is computed at a loop of R2, which has one loop fewer when R2 is itself computed at Y (it is not split);
    and a stage not at the root has no parallel choice."""
    sketch = _sketches("reduction_chain")["simple"]
    at_root = {c.var: c.values for c in sketch.space({})[1].structural}
    inside = {c.var: c.values for c in sketch.space({"R2_at": 0})[1].structural}
    assert at_root["R1_at"] == (-1, 0, 1, 2) and inside["R1_at"] == (-1, 0, 1)
    assert "R2_parallel" in at_root and "R2_parallel" not in inside
    rng = random.Random(6)
    structures = set()
    for _ in range(60):
        params = sketch.sample(rng)
        assert sketch.valid(params), params
        structures.add(tuple(sorted(sketch.structure_of(params).items())))
    assert {s for s in structures if dict(s)["R2_at"] == 0 and dict(s)["R1_at"] == 1}
    assert not sketch.valid({**params, "R2_at": 0, "R1_at": 2})


def test_every_tiled_sketch_has_divisor_tilings_unroll_and_parallel_choices():
    rng = random.Random(7)
    for name in MAKERS:
        for sketch in list(_sketches(name).values())[1:]:
            _, space = sketch.space({})
            for t in space.tilings:
                assert isinstance(t, Tiling) and t.vars
                params = t.sample(rng)
                outer = t.extent
                for v in t.vars:
                    assert outer % params[v] == 0
                    outer = params[v]
                assert math.prod(t.parts(params)) == t.extent
            for c in space.choices:
                assert c.var.endswith("_unroll") and c.values == UNROLL_STEPS == (0, 16, 64, 512)
            if "tile" in sketch.name:
                assert space.choices, (name, sketch.name)
            parallel = [c for c in space.structural if c.var.endswith("_parallel")]
            assert parallel, (name, sketch.name)
            for c in parallel:  # how many outer loops run in parallel: the finest few grains, counting down
                assert c.values == tuple(range(c.values[0], c.values[0] - len(c.values), -1))
                assert len(c.values) == min(MAX_PARALLEL_GRAINS, c.values[0] + 1)


def test_default_sketch_is_the_default_schedule():
    _, output = WORKLOADS["softmax_4x6x40"]()
    sketch = _sketches("softmax_4x6x40")["default"]
    assert sketch.sample(random.Random(0)) == {}
    assert sketch.bind({}).steps == default_schedule([output]).trace.steps


# -- every annotation of every sketch compiles and matches NumPy -----------------------------------------------


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_one_annotation_of_each_sketch_matches_numpy(name):
    rng = random.Random(sum(map(ord, name)))
    for sketch in list(_sketches(name).values())[1:]:  # the default schedule: tests/schedule/test_workloads.py
        _check(name, sketch, sketch.sample(rng))


def _annotations(kind: str, names: list[str]):
    """A test that samples annotations of the sketch named `kind` (or containing it) of these workloads."""

    @settings(max_examples=6, deadline=None)
    @given(name=st.sampled_from(names), seed=st.integers(0, 2**32 - 1))
    def test(name, seed):
        sketch = next(s for n, s in _sketches(name).items() if kind in n.split("+"))
        _check(name, sketch, sketch.sample(random.Random(seed)))

    return test


test_random_cache_write_tilings = _annotations("tile_cache_write", ["matmul_64x48x40", "conv2d_3x3_c4_14x14",
                                                                    "batch_matmul_3x17x12x9"])
test_random_in_place_tilings = _annotations("tile", ["matmul_64x48x40", "depthwise_conv2d_c8_stride2",
                                                     "packed_matmul_37x29x13_bt"])
test_random_fused_tilings = _annotations("tile_fused", ["dense_5x24x10", "attention_heads_as_queries"])
test_random_rfactors = _annotations("rfactor", ["layernorm_6x64", "long_sum"])
test_random_simple_schedules = _annotations("simple", ["softmax_4x6x40", "reduction_chain", "conv2d_nchwc_pad",
                                                       "avg_pool2d_ceil"])


# -- parameters ---------------------------------------------------------------------------------------------------


def test_divisors():
    for n in range(1, 100):
        assert divisors(n) == tuple(d for d in range(1, n + 1) if n % d == 0)


def test_factorizations_are_the_ordered_products_with_a_bounded_innermost():
    assert set(factorizations(12, 3)) == {(a, b, c) for a in range(1, 13) for b in range(1, 13) for c in range(1, 13)
                                          if a * b * c == 12}
    assert len(factorizations(12, 3)) == 18
    assert all(p[-1] <= MAX_INNERMOST for p in factorizations(256, 2)) and (1, 256) not in factorizations(256, 2)


def test_tiling_samples_every_factorization_uniformly():
    tiling = Tiling(12, ("a", "b"))
    rng = random.Random(8)
    counts = collections.Counter()
    for _ in range(3600):
        params = tiling.sample(rng)
        assert tiling.valid(params)
        parts = tiling.parts(params)
        assert math.prod(parts) == 12 and (params["a"], params["b"]) == (parts[1] * parts[2], parts[2])
        counts[parts] += 1
    assert set(counts) == set(factorizations(12, 3))
    expected = 3600 / 18
    assert all(0.6 * expected < n < 1.4 * expected for n in counts.values()), counts


def test_tiling_valid_rejects_non_divisors():
    tiling = Tiling(12, ("a", "b"))
    assert tiling.valid({"a": 6, "b": 3})
    assert not tiling.valid({"a": 5, "b": 1})  # 5 does not divide 12
    assert not tiling.valid({"a": 6, "b": 4})  # 4 does not divide 6
    assert not tiling.valid({"a": 0, "b": 1})
    assert not Tiling(128, ("a",)).valid({"a": 128})  # innermost above MAX_INNERMOST
    assert Tiling(128, ("a",)).valid({"a": 64})


def test_sketch_valid_rejects_params_outside_their_domains():
    sketch = _sketches("matmul_64x48x40")["tile"]
    params = sketch.sample(random.Random(9))
    assert sketch.valid(params)
    assert not sketch.valid({**params, "C_unroll": 32})
    assert not sketch.valid({**params, "C_parallel": 9})
    assert not sketch.valid({**params, "C_k_t1": 5})
    assert not sketch.valid({k: v for k, v in params.items() if k != "C_unroll"})
    chain = _sketches("reduction_chain")["simple"]
    assert not chain.valid({**chain.sample(random.Random(9)), "R2_at": 7})


def test_space_is_cached_per_structure():
    sketch = _sketches("softmax_4x6x40")["simple"]
    assert sketch.space({}) is sketch.space({})
    a = sketch.space({"Y_expsum_at": 1, "Y_parallel": 2})
    assert sketch.space({"Y_parallel": 2, "Y_expsum_at": 1}) is a
    assert isinstance(a[1].structural[0], Choice)


# -- traces serialise ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["matmul_64x48x40", "dense_5x24x10", "layernorm_6x64", "conv2d_nchwc_pad",
                                  "softmax_4x6x40"])
def test_sketch_traces_survive_json(name):
    rng = random.Random(10)
    for sketch in _sketches(name).values():
        params = sketch.sample(rng)
        tr = sketch.bind(params)
        back = Trace.from_json(tr.to_json())
        assert str(back) == str(tr)
        loops = [format_kernel(lower(apply_trace([MAKERS[name]()[1]], t))) for t in (tr, back)]
        assert loops[0] == loops[1]
        symbolic, _ = sketch.space(sketch.structure_of(params))  # with its numeric Vars
        assert Trace.from_json(symbolic.to_json()).bind(params) == tr
