"""AutoTVM's config space: enumeration, index round trips, defaults, neighbours and the JSON the records keep."""

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad.errors import ScheduleError
from tilegrad.tune.autotvm import ConfigSpace


def _space():
    cfg = ConfigSpace("toy")
    cfg.define_split("tile_i", 24, 3)
    cfg.define_split("tile_j", 10, 2, "candidate", candidates=[(4,), (8,)], default=(5,))
    cfg.define_reorder("order", ["a", "b", "c"])
    cfg.define_annotate("ann", ["x", "y"], "try_unroll_vec", default=("unroll", "vec"))
    cfg.define_knob("grain", range(3), default=2)
    return cfg


def test_split_factors_are_every_exact_factorization():
    cfg = ConfigSpace("s")
    cfg.define_split("t", 24, 3)
    sizes = {e.sizes(24) for e in cfg.knobs["t"].entities}
    want = {(a, b, c) for a, b, c in itertools.product(range(1, 25), repeat=3) if a * b * c == 24}
    assert sizes == want


def test_the_space_is_the_product_of_its_knobs_and_every_index_is_one_distinct_config():
    cfg = _space()
    dims = [len(k.entities) for k in cfg.knobs.values()]
    # tile_i: ordered triples with product 24 (30); tile_j: 2 candidates + the default; 3! orders; 2 x 3
    # annotations; 3 grains
    assert dims == [30, 3, 6, 6, 3]
    assert len(cfg) == math.prod(dims)
    seen = set()
    for i in range(len(cfg)):
        choices = tuple(cfg.choices(i))
        assert cfg.index_of(choices) == i
        seen.add(choices)
    assert len(seen) == len(cfg)


def test_the_default_is_the_one_each_knob_was_given_and_non_divisible_defaults_are_points():
    cfg = _space()
    d = cfg.default()
    assert d["tile_j"].factors == (5,) and d["tile_j"].sizes(10) == (2, 5)
    assert d["order"].perm == (0, 1, 2)
    assert d["ann"].anns == ("unroll", "vec")
    assert d["grain"].val == 2
    assert d["tile_i"] == cfg["tile_i"]  # a space reads its defaults
    cfg2 = ConfigSpace("s")
    cfg2.define_split("t", 100, 3, default=(17, 8))  # does not divide 100: added, tails rounded up
    assert cfg2["t"].sizes(100) == (6, 3, 8)
    assert cfg2["t"] not in cfg2.knobs["t"].entities[:-1]


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_json_round_trip_and_neighbours_change_one_knob(data):
    cfg = _space()
    i = data.draw(st.integers(0, len(cfg) - 1))
    c = cfg.get(i)
    assert cfg.from_json(c.to_json()) == c
    j = cfg.neighbour(i, random.Random(data.draw(st.integers(0, 10**6))))
    assert sum(a != b for a, b in zip(cfg.choices(i), cfg.choices(j))) == 1


def test_a_record_of_another_space_or_changed_knobs_is_not_recovered():
    cfg = _space()
    obj = cfg.get(7).to_json()
    assert cfg.from_json({**obj, "space": "other"}) is None
    assert cfg.from_json({**obj, "knobs": {**obj["knobs"], "grain": 99}}) is None
    assert cfg.from_json({**obj, "index": len(cfg)}) is None


def test_knob_features_are_numbers_padded_with_missing():
    cfg = _space()
    x = cfg.knob_features([0, cfg.default().index], 24)
    assert x.shape == (2, 24)
    # tile_i's factors (1, 1) and tile_j's (5,) in log2, the order, the annotations' positions, the grain
    want = [0, 0, math.log2(5), 0, 1, 2, 1, 2, 2]
    np.testing.assert_allclose(x[1, :9], want)
    assert np.isnan(x[1, 9:]).all()


def test_template_errors_name_the_knob():
    cfg = _space()
    with pytest.raises(ScheduleError, match="'grain' defined twice"):
        cfg.define_knob("grain", range(2))
    with pytest.raises(ScheduleError, match="'missing' is not in the space"):
        cfg.get(0).define_knob("missing", range(2))
    with pytest.raises(ScheduleError, match="outside the space"):
        cfg.get(len(cfg))
    with pytest.raises(ScheduleError, match="unknown policy 'power9'"):
        cfg.define_split("x", 8, 2, "power9")
