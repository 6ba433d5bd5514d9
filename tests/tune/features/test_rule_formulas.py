"""DESIGN §3.3 on the sketches the derivation rules generate: for every rule (inline, multi-level tiling with a
fused consumer, with cache_write and in place, rfactor, simple with its compute locations), substituting a
sampled assignment into the sketch's feature formulas gives exactly the features of the program lowered from
that assignment."""

import functools
import random

import numpy as np
import pytest

from tilegrad import te
from tilegrad.loop import lower
from tilegrad.schedule import apply_trace
from tilegrad.schedule.sketch import generate_sketches
from tilegrad.target import Target
from tilegrad.tune.features.extract import FEATURE_NAMES, features
from tilegrad.tune.features.formulas import FeatureFormulas
from tilegrad.workloads import WORKLOADS

RULES = ("inline", "tile_fused", "tile_cache_write", "tile", "rfactor", "simple")


def _long_sum():
    x = te.placeholder((3, 512), "float32", "X")
    k = te.reduce_axis(512, "k")
    return [x], te.compute((3,), lambda i: te.sum(x[i, k], axis=[k]), name="Y")


MAKERS = {name: WORKLOADS[name] for name in ("matmul_64x48x40", "dense_5x24x10", "conv2d_3x3_c4_14x14",
                                             "softmax_4x6x40", "layernorm_6x64", "add_gelu_4x33")}
MAKERS["long_sum"] = _long_sum


@functools.cache
def _sketches(name):
    make = MAKERS[name]
    return generate_sketches(lambda: [make()[1]])[1:]  # the default schedule has no parameters


def _cases():
    return [(name, i) for name in MAKERS for i in range(len(_sketches(name)))]


def test_the_workloads_cover_every_rule():
    decisions = {d for name in MAKERS for sk in _sketches(name) for d in sk._rule.keywords["plan"].values()}
    assert set(RULES) <= decisions


@pytest.mark.parametrize("name,index", _cases())
def test_formulas_of_a_generated_sketch_equal_the_concrete_features(name, index):
    sketch = _sketches(name)[index]
    make = MAKERS[name]
    rng = random.Random(index)
    for _ in range(3):
        params = sketch.sample(rng)
        structure = sketch.structure_of(params)
        trace, space = sketch.space(structure)
        numeric = [v for t in space.tilings for v in t.vars] + [c.var for c in space.choices]
        symbolic = lower(apply_trace([make()[1]], trace.bind(structure)))
        ff = FeatureFormulas(symbolic, numeric)
        got = ff.evaluate({v: np.array([params[v]]) for v in ff.variables})[0]
        want = features(lower(apply_trace([make()[1]], sketch.bind(params))))
        assert got.shape == want.shape
        bad = [(ff.stores[s], FEATURE_NAMES[f], got[s, f], want[s, f]) for s, f in np.argwhere(got != want)]
        assert not bad, f"{sketch.name} {params}: {bad[:8]}"


# The default sketch: the hand-written rules with their tiles, blocking, orders, grains and unrolling as
# parameters. Besides random points, each workload is checked at a point whose tiles do not divide their loops
# (guarded tails), so the formulas count the tail's work as the concrete program does.
DEFAULT_MAKERS = {name: WORKLOADS[name] for name in ("matmul_64x48x40", "packed_matmul_37x29x13_bt",
                                                     "batch_matmul_3x17x12x9", "dense_5x24x10",
                                                     "packed_conv2d_o11_block8", "conv2d_3x3_c4_14x14")}
DEFAULT_MAKERS["conv2d_nchwc"] = lambda: _nchwc()
DEFAULT_MAKERS["packed_matmul_k_blocks"] = lambda: _packed_matmul(70, 70, 40)
EIGHT_LANES = Target.with_lanes(8)  # the tails below are for tiles of 8-lane vectors, whatever the host's
TAILS = {"matmul_64x48x40": {"C_mr": 5, "C_nr": 24, "C_local_kb": 32}, "packed_matmul_37x29x13_bt": {"C_mb": 30},
         "batch_matmul_3x17x12x9": {"C_mr": 3, "C_mb": 16}, "dense_5x24x10": {"Y_mr": 2, "Y_nr": 16},
         "packed_conv2d_o11_block8": {"Y_wr": 3, "Y_blocks": 2}, "conv2d_3x3_c4_14x14": {"Y_wr": 5, "Y_cr": 3},
         "conv2d_nchwc": {"Y_wr": 3, "Y_blocks": 2}, "packed_matmul_k_blocks": {"C_padded_kblocks": 4, "C_mb": 54}}


def _packed_matmul(m, k, n):
    a, b = te.placeholder((m, k), "float32", "A"), te.placeholder((n, k), "float32", "B")
    return [a, b], te.nn.packed_matmul(a, b, transpose_b=True, mr=6, nr=8, name="C")


def _nchwc():
    from tilegrad.te.nn.nchwc import conv2d_nchwc

    x, w = te.placeholder((1, 4, 8, 8), "float32", "X"), te.placeholder((2, 4, 3, 3, 4), "float32", "W")
    return [x, w], conv2d_nchwc(x, w, padding=1, name="Y")


@pytest.mark.parametrize("name", sorted(DEFAULT_MAKERS))
def test_formulas_of_the_default_sketch_equal_the_concrete_features(name):
    make = DEFAULT_MAKERS[name]
    sketch = generate_sketches(lambda: [make()[1]], EIGHT_LANES)[0]
    rng = random.Random(name)
    tail = sketch.completed({**sketch.default_params(), **TAILS[name]})
    assert {k: tail[k] for k in TAILS[name]} == TAILS[name]
    for params in [sketch.default_params(), tail] + [sketch.sample(rng) for _ in range(3)]:
        structure = sketch.structure_of(params)
        trace, space = sketch.space(structure)
        assert space.choices, "the default sketch of a tiled rule has numeric parameters"
        symbolic = lower(apply_trace([make()[1]], trace.bind(structure)))
        ff = FeatureFormulas(symbolic, [c.var for c in space.choices])
        got = ff.evaluate({v: np.array([params[v]]) for v in ff.variables})[0]
        want = features(lower(apply_trace([make()[1]], sketch.bind(params))))
        bad = [(ff.stores[s], FEATURE_NAMES[f], got[s, f], want[s, f]) for s, f in np.argwhere(got != want)]
        assert not bad, f"default {params}: {bad[:8]}"
