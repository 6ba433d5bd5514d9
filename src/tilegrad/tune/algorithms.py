"""Convolution algorithms as a tuning choice, the way TVM's op strategies offer several implementations of an op
and keep the one whose tuned kernel is fastest.

passes/conv_algorithm.py picks each convolution's algorithm (direct, im2col, Winograd F(2,3) or F(4,3)) by an
estimate in multiply-adds, calibrated on another machine. Tuning measures instead. Besides the graph `compile`
builds, each other algorithm gives a variant graph in which every convolution it applies to uses it, and the
variants' kernels join the task list (`algorithm_tasks`). With a records database, `choose` compares the default
graph, each variant, and the mix that gives every convolution the algorithm whose kernels were fastest (or, where
that mix needs a kernel never timed, the part of it that keeps each convolution's layout), and returns the
fastest of these graphs. `compile(db=)` builds that one.

The block of the channel layout NCHW[x]c is a choice of the same kind (TVM tunes it with the schedule): each block
size of `passes.layout.block_sizes` other than the default gives a variant graph in which every convolution runs
direct in blocks of that size, labelled "direct@16" (say) in `choice` and on its tasks. The mix then picks each
convolution's algorithm x block; where its neighbours' blocks differ, the mix has the `layout_reblock`
transforms, and convolutions reading another block, of its own, which a candidate never timed loses to the
others.

The fusion plan is a choice of the same kind (FusionStitching's plans tuned with the schedules): the graph fused
by the stitching explorer (`passes/stitch.py`, options["fusion"] = "stitch") is, with `fusion_plans`, a variant
labelled STITCH, whose
kernels the rule-based graph lacks become tasks, and `choose` keeps it when its kernels are faster by the records.
The variant's report holds the plan (`decisions["stitch"]`: each fused kernel's composition scheme and sub-roots).

The attention kernels' softmax form is one more (passes/attention_form.py): where the default graph has attention
nodes, each form some of them do not use gives a variant graph with that form on every attention node (the
option `attention_form`), labelled "attention=blockwise" (say), whose kernels become tasks; `choose` keeps it
when its kernels are faster by the records, and its report holds each node's form (`decisions["attention"]`).
Where the attention form is fixed by the caller (`attention_form` other than "auto"), there is no such variant.

Whole graphs are compared, not single kernels, because a convolution's algorithm also decides the layout
transforms around it (direct convolutions run in blocked NCHWc, the others in NCHW). A graph's latency is the sum
over its kernels of their best recorded latencies, counting only the kernels that not every candidate graph
shares, so a kernel never tuned cannot hide a difference elsewhere; a candidate with an untimed kernel of its
own loses.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Sequence

from ..ir.graph import Graph, Node
from ..passes import optimize
from ..passes.attention_form import AUTO, FORMS, attention_options
from ..passes.conv_algorithm import ALGORITHMS
from ..passes.layout import block_sizes
from ..passes.pipeline import Report
from ..target import host
from .fusion_costs import measured_fusion_costs
from .fusion_plans import measured_latencies
from .task import Task, extract_tasks, kernels

MIXED = "mixed"  # the algorithm label of the variant that mixes each convolution's fastest algorithm
STITCH = "stitch"  # the label of the variant fused by the stitching explorer


@dataclasses.dataclass
class Variant:
    """An optimised graph and the algorithm label of each of its convolutions (by node name): the algorithm, with
    "@block" where a direct one runs in other than the default block. `algorithm` is the label imposed wherever
    it applies, MIXED, or None for the estimate's choices."""

    algorithm: str | None
    choice: dict[str, str]
    graph: Graph
    report: Report
    runs: dict[str, str]
    """The name of the graph node that runs each convolution (passes rename what they replace) -> its name in
    `choice`."""
    attention_form: str = AUTO
    """The softmax form imposed on every attention node, or AUTO: each node's by its shape."""


def build_variant(imported: Graph, choice: dict[str, str] | None = None, algorithm: str | None = None, *,
                  opt_level: int = 2, disable: Sequence[str] = (), enable: Sequence[str] = (),
                  fusion: str = "rules", attention_form: str = AUTO, attention_key_block: int | None = None) -> Variant:
    """`imported` through the passes, with the convolutions of `choice` forced to its algorithm labels, fused by
    the `fusion` strategy, its attention kernels in `attention_form` (AUTO: by shape)."""
    parsed = {name: _parse(label) for name, label in (choice or {}).items()}
    blocks = {name: block for name, (_, block) in parsed.items() if block}
    options = attention_options(attention_form, attention_key_block)
    if choice:
        options["conv_algorithm"] = {name: a for name, (a, _) in parsed.items()}
    if fusion == "stitch":  # the beam's plans ranked by timing their kernels
        options.update(fusion=fusion, fusion_costs=measured_fusion_costs(), rank_plans=measured_latencies)
    if blocks:
        options["layout_block"] = blocks
    graph, report = optimize(imported, opt_level, disable=disable, enable=enable, options=options)
    decided = report.decisions.get("conv_algorithm", {})
    blocked = report.decisions.get("layout", {})
    runs = {blocked.get(c.node, c.node): name for name, c in decided.items()}
    labels = {name: _label(c.algorithm, blocks.get(name)) for name, c in decided.items()}
    return Variant(algorithm, labels, graph, report, runs, attention_form)


def variants(imported: Graph, *, fusion_plans: bool = False, **passes) -> list[Variant]:
    """The default graph, then one graph per other algorithm that some convolution could use instead, then one per
    other block size in which the direct convolutions run blocked (none where the layout pass does not run), then
    one per attention form that some attention node of the default graph does not use (where the caller leaves
    the form AUTO), then (with `fusion_plans`) the stitched graph where its kernels differ."""
    default = build_variant(imported, **passes)
    decided = default.report.decisions.get("conv_algorithm", {})
    out = [default]
    for algorithm in ALGORITHMS:
        choice = {name: algorithm if algorithm in c.applicable else c.algorithm for name, c in decided.items()}
        if choice != default.choice:
            out.append(build_variant(imported, choice, algorithm, **passes))
    for block in block_sizes(host())[1:]:
        label = _label("direct", block)
        v = build_variant(imported, dict.fromkeys(decided, label), label, **passes)
        if v.report.decisions.get("layout"):
            out.append(v)
    if passes.get("attention_form", AUTO) == AUTO:
        forms = {c.form for c in default.report.decisions.get("attention", {}).values()}
        out += [build_variant(imported, None, f"attention={form}", **{**passes, "attention_form": form})
                for form in FORMS if forms - {form}]
    if not fusion_plans:
        return out
    stitched = build_variant(imported, fusion="stitch", algorithm=STITCH, **passes)
    if Counter(key for *_, key in kernels(stitched.graph)) != Counter(key for *_, key in kernels(default.graph)):
        out.append(stitched)
    return out


def algorithm_tasks(vs: Sequence[Variant]) -> list[Task]:
    """The tasks of the first (default) graph, then the variants' tasks it lacks, labelled with their algorithm
    and weighted by their occurrences in their own graph; each with the places it runs (convolutions, attention
    nodes), so the tuner can tell which kernels are alternatives for the same ones."""
    tasks: dict[str, Task] = {}
    for v in vs:
        convolutions = _places_by_key(v)
        for t in extract_tasks(v.graph):
            if t.key not in tasks:
                tasks[t.key] = dataclasses.replace(t, algorithm=v.algorithm, convolutions=convolutions[t.key])
    return list(tasks.values())


def _places_by_key(v: Variant) -> dict[str, frozenset[str]]:
    """The places that the kernels of each workload run in the variant's graph, where another variant may run
    them otherwise: convolutions (names in `choice`) and attention nodes (their names, the same in every
    variant, each form's kernel an alternative for the other's)."""
    out: dict[str, frozenset[str]] = {}
    for node, _, key in kernels(v.graph):
        members = node.attrs["body"].nodes if node.op == "fused" else [node]
        places = {v.runs[n.name] for n in members if n.name in v.runs} | {n.name for n in members
                                                                         if n.op == "attention"}
        out[key] = out.get(key, frozenset()) | places
    return out


def choose(imported: Graph, latency: Callable[[str], float | None], *, fusion_plans: bool = False,
           **passes) -> Variant:
    """The candidate graph (default, variants, mix; with `fusion_plans` the stitched graph too) with the lowest
    latency by `latency(task key)`, the best recorded latency of a workload or None; the default where nothing
    tells them apart."""
    candidates = [_Costed(v, latency) for v in variants(imported, fusion_plans=fusion_plans, **passes)]
    if len(candidates) == 1:
        return candidates[0].variant
    by_conv: dict[str, dict[str, float]] = {}
    for c in candidates:  # the default first: ties keep its choice
        for name, s in c.per_conv.items():
            by_conv.setdefault(name, {}).setdefault(c.variant.choice[name], s)
    mix = {name: min(options, key=options.get) for name, options in by_conv.items()}
    default = candidates[0].variant.choice
    # A mix that changes a convolution's layout may need a layout transform no candidate had, never timed; then
    # try the mix of the changes that keep each convolution's layout (Winograd F(2,3) for F(4,3), say).
    same_layout = {name: a if _layout(a) == _layout(default[name]) else default[name] for name, a in mix.items()}
    for choice in (mix, same_layout):
        if all(c.variant.choice != choice for c in candidates):
            candidates.append(_Costed(build_variant(imported, choice, MIXED, **passes), latency))
            if all(latency(key) is not None for key in candidates[-1].keys):
                break
    shared = Counter(candidates[0].keys)
    for c in candidates[1:]:
        shared &= c.keys
    return min(candidates, key=lambda c: c.latency(shared, latency)).variant


class _Costed:
    """A variant's kernels by workload key, and each convolution's recorded latency: that of the kernels that
    contain it (inf where one has no record)."""

    def __init__(self, variant: Variant, latency: Callable[[str], float | None]):
        self.variant = variant
        self.keys: Counter[str] = Counter()
        self.per_conv: dict[str, float] = {}
        for node, _, key in kernels(variant.graph):
            self.keys[key] += 1
            s = _or_inf(latency(key))
            for name in _members(node) & variant.runs.keys():
                conv = variant.runs[name]
                self.per_conv[conv] = self.per_conv.get(conv, 0.0) + s

    def latency(self, shared: Counter[str], latency: Callable[[str], float | None]) -> float:
        """The summed latency of the kernels beyond `shared`."""
        return sum(n * _or_inf(latency(key)) for key, n in (self.keys - shared).items())


def _label(algorithm: str, block: int | None) -> str:
    """A convolution's choice as one string: the algorithm, with "@block" for a direct one in another block."""
    return f"{algorithm}@{block}" if block else algorithm


def _parse(label: str) -> tuple[str, int | None]:
    """`_label`'s algorithm and block (None for the default block)."""
    algorithm, _, block = label.partition("@")
    return algorithm, int(block) if block else None


def _layout(label: str) -> tuple[bool, int | None]:
    """The layout a convolution of this label runs in: blocked (the layout pass blocks direct ones), and the
    block."""
    algorithm, block = _parse(label)
    return algorithm == "direct", block


def _or_inf(s: float | None) -> float:
    return math.inf if s is None else s


def _members(node: Node) -> set[str]:
    """The names of the graph nodes a kernel runs."""
    return {n.name for n in node.attrs["body"].nodes} if node.op == "fused" else {node.name}
