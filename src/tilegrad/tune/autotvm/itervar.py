"""Loop-program features of a scheduled config, read from its loop state: AutoTVM's "itervar" features.

Per stage that is not inlined (up to MAX_STAGES, in the state's order), per leaf loop outermost first (up to
MAX_LOOPS): log2 of its extent, whether it is a reduction, and its annotation (parallel, vectorized, unrolled)
as one-hot columns; then, per stage, how deep it is attached (0 at the root) and log2 of the product of its
extents by annotation. They come from the state the template's schedule already built, so scoring a config
costs a replay of its trace, where the store-level features of `features/extract.py` need a lowering and an
analysis of every access (docs/tuning.md gives the two costs).
"""

from __future__ import annotations

import math

import numpy as np

from ...schedule.state import LoopState, Stage
from ...te import expr as E

MAX_STAGES = 4
MAX_LOOPS = 10
KINDS = ("parallel", "vectorized", "unrolled")
PER_LOOP = 2 + len(KINDS)
PER_STAGE = MAX_LOOPS * PER_LOOP + 1 + len(KINDS) + 1
WIDTH = MAX_STAGES * PER_STAGE


def itervar_features(state: LoopState) -> np.ndarray:
    """The WIDTH features of `state` (NaN where a stage or loop is absent, or an extent is not a constant)."""
    out = np.full(WIDTH, np.nan)
    stages = [s for s in state.stages if s.attach != "inline"][:MAX_STAGES]
    for k, s in enumerate(stages):
        out[k * PER_STAGE:(k + 1) * PER_STAGE] = _stage_features(state, s)
    return out


def _stage_features(state: LoopState, s: Stage) -> np.ndarray:
    row = np.full(PER_STAGE, np.nan)
    by_kind = dict.fromkeys(KINDS, 0.0)
    total = 0.0
    for j, name in enumerate(s.leaves):
        lp = s.loops[name]
        extent = math.log2(lp.extent.value) if type(lp.extent) is E.Const and lp.extent.value > 0 else math.nan
        total += 0.0 if math.isnan(extent) else extent
        if lp.kind in by_kind and not math.isnan(extent):
            by_kind[lp.kind] += extent
        if j < MAX_LOOPS:
            row[j * PER_LOOP:(j + 1) * PER_LOOP] = [extent, float(lp.is_reduce),
                                                    *(float(lp.kind == kind) for kind in KINDS)]
    row[MAX_LOOPS * PER_LOOP] = _attach_depth(state, s)
    row[MAX_LOOPS * PER_LOOP + 1:] = [*by_kind.values(), total]
    return row


def _attach_depth(state: LoopState, s: Stage) -> float:
    depth = 0
    while isinstance(s.attach, tuple):
        depth += 1
        s = state.stage(s.attach[0])
    return float(depth)
