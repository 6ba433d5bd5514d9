"""Codegen snapshot: the C (after the shared prelude) of every catalogue workload under its default schedule
(AVX-512 rules, so the files do not depend on the machine) equals the file in tests/golden/. A pure refactor
leaves them unchanged; an intended change rewrites them with `pytest --update-golden`, and the diff is reviewed
in the same commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilegrad.codegen.c import PRELUDE, CRenderer
from tilegrad.loop import lower
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import Target
from tilegrad.workloads import WORKLOADS

AVX512 = Target(flags=frozenset({"avx512f", "fma"}), vector_bits=512)  # rendered for, whatever the machine
GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_generated_c_matches_golden(name, request):
    inputs, output = WORKLOADS[name]()
    sch = default_schedule(output, Target.with_lanes(16))
    source = CRenderer(AVX512).render(lower(sch.state, name, inputs + [sch.state.outputs[0]]))
    assert source.startswith(PRELUDE)
    source = source[len(PRELUDE):]  # the shared prelude is checked once, by the math tests, not in every file
    path = GOLDEN / f"{name}.c"
    if request.config.getoption("--update-golden"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(source)
    assert path.exists(), f"no golden file {path.name}; run pytest --update-golden and review it"
    assert source == path.read_text(), f"generated C for {name} changed; if intended, run pytest --update-golden"
