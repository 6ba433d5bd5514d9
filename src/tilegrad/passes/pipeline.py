"""The pass pipeline: Graph -> Graph functions run in a fixed order, chosen by `opt_level`, each one switchable.

A pass is a function `(graph, context) -> graph`. It may record what it did with `context.note(...)`; the
pipeline records, per pass, the node counts before and after and those notes, which `tilegrad compile
--explain` prints. Every pass keeps the graph's meaning: the tests run each one on random inputs before and after.

The order lives in one list, PIPELINE, here beside the driver that runs it: the file reads as what runs, when and
for which target, and the pass modules import only `context`, so nothing imports back into this file.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from typing import Callable, Iterable

from .. import progress
from ..errors import TilegradError
from ..ir.graph import Graph
from ..target import Target, host
from . import stitch  # noqa: F401  (registers the fuse pass's "stitch" strategy)
from .attention import form_attention
from .bias import fold_bias
from .bn_fold import fold_batch_norm
from .context import PassContext
from .conv_algorithm import conv_algorithm
from .conv_regions import conv_regions
from .cse import eliminate_common_subexpressions
from .expand import expand_composites
from .fold import fold_constants
from .fuse import fuse
from .hoist_slice import hoist_slice
from .int8_layout import int8_layout
from .layout import layout
from .pointwise_gemm import pointwise_gemm
from .quantize import fold_qdq
from .simplify import simplify
from .sink_reshape import sink_reshape


@dataclasses.dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Graph, PassContext], Graph]
    level: int  # runs when opt_level >= level
    targets: tuple[str, ...] = ("cpu", "cuda")  # the target kinds it serves (CPU layouts mean nothing on a GPU)


PIPELINE: tuple[Pass, ...] = (
    Pass("fold_qdq", fold_qdq, level=1),
    Pass("fold_constants", fold_constants, level=1),
    Pass("simplify", simplify, level=1),
    Pass("cse", eliminate_common_subexpressions, level=1),
    Pass("bn_fold", fold_batch_norm, level=1),
    Pass("fold_bias", fold_bias, level=1),
    Pass("hoist_slice", hoist_slice, level=2),
    Pass("attention", form_attention, level=2),
    Pass("expand", expand_composites, level=2),
    Pass("conv_algorithm", conv_algorithm, level=1, targets=("cpu",)),
    Pass("sink_reshape", sink_reshape, level=2),
    Pass("layout", layout, level=2, targets=("cpu",)),
    Pass("pointwise_gemm", pointwise_gemm, level=2, targets=("cpu",)),
    Pass("int8_layout", int8_layout, level=2, targets=("cpu",)),
    Pass("conv_regions", conv_regions, level=2, targets=("cpu",)),
    Pass("cse_late", eliminate_common_subexpressions, level=1),
    Pass("fuse", fuse, level=1),
)


@dataclasses.dataclass
class PassRecord:
    name: str
    nodes_before: int
    nodes_after: int
    ops_before: Counter
    ops_after: Counter
    notes: list[str]
    seconds: float


@dataclasses.dataclass
class Report:
    """What the pipeline did, pass by pass, and the decisions passes recorded (`PassContext.decisions`)."""

    records: list[PassRecord] = dataclasses.field(default_factory=list)
    decisions: dict = dataclasses.field(default_factory=dict)

    def format(self) -> str:
        lines = []
        for r in self.records:
            delta = _op_delta(r.ops_before, r.ops_after)
            lines.append(f"{r.name}: {r.nodes_before} -> {r.nodes_after} nodes ({r.seconds * 1e3:.1f} ms)"
                         + (f"  [{delta}]" if delta else ""))
            lines.extend(f"    {note}" for note in r.notes)
        return "\n".join(lines)


def _op_delta(before: Counter, after: Counter) -> str:
    parts = []
    for op in sorted(set(before) | set(after)):
        d = after[op] - before[op]
        if d:
            parts.append(f"{op} {d:+d}")
    return ", ".join(parts)


def pass_names() -> list[str]:
    return [p.name for p in PIPELINE]


def optimize(g: Graph, opt_level: int = 2, *, disable: Iterable[str] = (), enable: Iterable[str] = (),
             options: dict | None = None, target: Target | None = None) -> tuple[Graph, Report]:
    """Run the passes of `opt_level` (less `disable`, plus `enable`) over `g` for `target` (default: this
    machine); the result and the report."""
    names = pass_names()
    disable, enable = set(disable), set(enable)
    unknown = (disable | enable) - set(names)
    if unknown:
        raise TilegradError(f"unknown pass(es) {sorted(unknown)}; passes: {', '.join(names)}")
    ctx = PassContext(opt_level, target or host(), dict(options or {}))
    report = Report(decisions=ctx.decisions)
    chosen = [p for p in PIPELINE if not (p.name in disable or (p.level > opt_level and p.name not in enable)
                                          or ctx.target.kind not in p.targets)]
    progress.stage("graph passes", len(chosen))
    for p in chosen:
        before = Counter(n.op for n in g.nodes)
        ctx.notes = []
        start = time.perf_counter()
        g = p.run(g, ctx)
        report.records.append(PassRecord(p.name, sum(before.values()), len(g.nodes), before,
                                         Counter(n.op for n in g.nodes), ctx.notes, time.perf_counter() - start))
        progress.advance(p.name)
    return g, report
