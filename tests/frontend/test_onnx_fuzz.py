"""The ONNX fuzzer's cases (`tilegrad.tools.onnx_fuzz`) through import and compile: every mutated model is either
compiled or refused with a `TilegradError`; none raises anything else, and none that reads external data from
outside its directory is accepted. `benchmarks/fuzz_onnx.py` runs more cases, and builds and runs them too."""

from __future__ import annotations

import pytest

from tilegrad.tools.onnx_fuzz import SEEDS, Case, make_case, run_case

CASES = 300


@pytest.mark.parametrize("seed", list(SEEDS))
def test_every_seed_model_compiles_and_runs(seed, tmp_path):
    outcome = run_case(Case(0, SEEDS[seed](), [seed]), tmp_path, ("import", "compile", "run"))
    assert outcome.kind == "ok", outcome


def test_cases_are_reproducible():
    a, b = make_case(17), make_case(17)
    assert a.mutations == b.mutations and a.model.SerializeToString() == b.model.SerializeToString()


def test_no_case_escapes_as_another_exception(tmp_path):
    escapes = []
    kinds = {}
    for number in range(CASES):
        outcome = run_case(make_case(number), tmp_path / str(number))
        kinds[outcome.kind] = kinds.get(outcome.kind, 0) + 1
        if outcome.kind not in ("ok", "tilegrad error"):
            escapes.append((number, outcome))
    assert not escapes, "\n".join(f"case {n}: {o}" for n, o in escapes[:20])
    assert kinds.get("ok", 0) > CASES // 10 and kinds.get("tilegrad error", 0) > CASES // 4, kinds
