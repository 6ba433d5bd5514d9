"""The backend table: one row per target kind, each with every piece the layers ask for."""

import pytest

from tilegrad.backend import BACKENDS, Backend, backend_for
from tilegrad.errors import TilegradError
from tilegrad.target import GPUS, TARGETS, Target, host

PIECES = [name for name in Backend.__dict__ if not name.startswith("_")] + list(Backend.__annotations__)


def test_every_target_kind_has_a_row_with_every_piece():
    kinds = {TARGETS[name]().kind for name in TARGETS}
    assert kinds == set(BACKENDS)
    for backend in BACKENDS.values():
        missing = [p for p in PIECES if not hasattr(backend, p)]
        assert not missing, f"{backend.kind} lacks {missing}"


def test_rows_are_read_by_the_targets_kind():
    assert backend_for(host()).kind == "cpu"
    assert backend_for(GPUS["sm_90"]).gpu_features and not backend_for(host()).gpu_features
    assert backend_for(host()).renderer(host()).target is host()


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(TilegradError, match=r"kind 'tpu'.*cpu, cuda"):
        backend_for(Target(kind="tpu"))
