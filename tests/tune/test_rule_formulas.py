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
