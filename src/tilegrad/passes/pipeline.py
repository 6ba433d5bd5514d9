"""The pass pipeline: Graph -> Graph functions run in a fixed order, chosen by `opt_level`, each one switchable.

A pass is a function `(graph, context) -> graph`. It may record what it did with `context.note(...)`; the
pipeline records, per pass, the node counts before and after and those notes, which `tilegrad compile
--explain` prints. Every pass keeps the graph's meaning: the tests run each one on random inputs before and after.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from typing import Callable, Iterable

from ..errors import TilegradError
from ..ir.graph import Graph
from ..target import Target, host


@dataclasses.dataclass
class PassContext:
    """What a pass may read (the options) and write (its notes for --explain, and decisions by pass name that
    later stages read: the conv_algorithm pass's per-node choices, which the tuner varies)."""

    opt_level: int = 2
    target: Target = dataclasses.field(default_factory=host)
    options: dict = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    decisions: dict = dataclasses.field(default_factory=dict)

    def note(self, message: str) -> None:
        self.notes.append(message)


@dataclasses.dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Graph, PassContext], Graph]
    level: int  # runs when opt_level >= level
    order: int  # position in the pipeline
    doc: str
    targets: tuple[str, ...] = ("cpu", "cuda")  # the target kinds it serves (CPU layouts mean nothing on a GPU)


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


PASSES: list[Pass] = []


def register(name: str, *, level: int, order: int, targets: tuple[str, ...] = ("cpu", "cuda")):
    """Add a pass to the pipeline at position `order` (the table in passes/__init__.py), run from `level` up,
    for the target kinds `targets`."""
    def add(fn):
        if any(p.name == name or p.order == order for p in PASSES):
            raise ValueError(f"pass {name!r} (order {order}) clashes with a registered pass")
        PASSES.append(Pass(name, fn, level, order, (fn.__doc__ or "").strip().split("\n")[0], targets))
        PASSES.sort(key=lambda p: p.order)
        return fn
    return add


def pass_names() -> list[str]:
    from . import ALL  # noqa: F401  (importing the pass modules fills PASSES)

    return [p.name for p in PASSES]


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
    for p in PASSES:
        if p.name in disable or (p.level > opt_level and p.name not in enable) or ctx.target.kind not in p.targets:
            continue
        before = Counter(n.op for n in g.nodes)
        ctx.notes = []
        start = time.perf_counter()
        g = p.run(g, ctx)
        report.records.append(PassRecord(p.name, sum(before.values()), len(g.nodes), before,
                                         Counter(n.op for n in g.nodes), ctx.notes, time.perf_counter() - start))
    return g, report
