"""What a fusion pattern saves, and what a whole plan costs: the stitching explorer's two evaluators.

The delta-evaluator scores a pattern P by the seconds fusing it saves, as FusionStitching does:
    f(P) = T_reduced_mem + T_reduced_calls - T_penalty
- T_reduced_mem: the bytes of the values that stay inside P (each would be written once and read by each of its
  readers) times the seconds per byte of the regression of memory-bound kernels' latency on the bytes they move;
- T_reduced_calls: the kernel calls saved (members that run a kernel, less one) times one call's cost;
- T_penalty: the recomputation the fused kernel does. Outside a row loop every producer is inlined into each of its
  readers (thread composition), so a producer read k times costs (k - 1) times its expression's work; an expensive
  element-wise op (one whose compute calls a function or divides: exp, erf, tanh, div...) weighs EXPENSIVE_WEIGHT
  light ones. Inside a row loop (a reduction read in the pattern: block composition) a shared producer is kept per
  row block and costs nothing again, and the reductions themselves are sub-roots, computed once per row
  (`fusion_rules.refusal` refuses any other way of reading a reduction).
The latency-evaluator estimates a whole plan from the same figures: per kernel one call, the bytes it reads and
writes, and its element work. Measuring plans instead is the tuner's job (`tune/fusion_plans.py`, passed to the
pass as options["rank_plans"]).

The figures are `FusionCosts`, measured on the machine by `tune/fusion_costs.py` and passed in the pass options;
`NOMINAL` stands in when the passes run without them.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir.compute import node_compute
from ..ir.graph import Node
from ..ir.registry import OPAQUE, OUT_FUSABLE, REDUCTION, lookup
from ..te import expr as E
from .fusion_rules import GraphIndex, fusion_kind
from .memory_plan import nbytes

LIGHT, EXPENSIVE = "light", "expensive"  # element-wise op classes; a reduction's class is REDUCTION
EXPENSIVE_WEIGHT = 8  # light element-wise ops per expensive one (a libm call or a division per element)


@dataclasses.dataclass(frozen=True)
class FusionCosts:
    """The machine's figures the evaluators convert savings to seconds with."""

    seconds_per_byte: float  # slope of a memory-bound kernel's latency on the bytes it reads and writes
    call_seconds: float  # one call of an empty parallel kernel
    op_seconds: float  # one light element-wise operation on one element, all threads together

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


NOMINAL = FusionCosts(seconds_per_byte=1 / 10e9, call_seconds=4e-6, op_seconds=2e-10)


@dataclasses.dataclass(frozen=True)
class Score:
    """A pattern's delta, in seconds saved, and its three terms."""

    reduced_mem: float
    reduced_calls: float
    penalty: float

    @property
    def total(self) -> float:
        return self.reduced_mem + self.reduced_calls - self.penalty

    def __str__(self) -> str:
        return (f"f={self.total * 1e6:+.1f}us (mem {self.reduced_mem * 1e6:.1f}, calls "
                f"{self.reduced_calls * 1e6:.1f}, penalty {self.penalty * 1e6:.1f})")


def op_class(n: Node) -> str:
    """LIGHT, EXPENSIVE or REDUCTION, read from the node's kind and its compute's arithmetic."""
    if fusion_kind(n) == REDUCTION:
        return REDUCTION
    if lookup(n.op).kind in (OUT_FUSABLE, OPAQUE):  # never inlined: weighed like the heaviest element-wise op
        return EXPENSIVE
    _, outs = node_compute(n)
    stack = [t.op.body for t in outs if hasattr(t.op, "body")]
    while stack:
        e = stack.pop()
        if isinstance(e, (E.Call, E.Div)) and E.is_float(e.dtype):
            return EXPENSIVE
        if type(e) is not E.Load:
            stack.extend(e.children())
    return LIGHT


class Evaluator:
    """Both evaluators over one graph, with each node's op class worked out once."""

    def __init__(self, ix: GraphIndex, costs: FusionCosts):
        self.ix, self.costs = ix, costs
        self._classes: dict[int, str] = {}

    def op_class(self, i: int) -> str:
        if i not in self._classes:
            self._classes[i] = op_class(self.ix.g.nodes[i])
        return self._classes[i]

    def work(self, i: int) -> float:
        """Light element-ops of one run of node i."""
        n = self.ix.g.nodes[i]
        weight = EXPENSIVE_WEIGHT if self.op_class(i) == EXPENSIVE else 1
        return weight * sum(math.prod(o.shape) for o in n.outputs)

    def runs_kernel(self, i: int) -> bool:
        return not lookup(self.ix.g.nodes[i].op).view

    def row_mode(self, members: frozenset[int]) -> bool:
        """Whether some member reads a reduction of the pattern (then the kernel runs row by row)."""
        return any(self.op_class(p) == REDUCTION for i in members for p in self.ix.producers_of(i)
                   if p in members)

    def delta(self, members: frozenset[int]) -> Score:
        ix, c = self.ix, self.costs
        kept = 0
        for i in members:
            for v in ix.g.nodes[i].outputs:
                readers = set(ix.consumers.get(id(v), []))
                if id(v) not in ix.graph_outputs and readers <= members:
                    kept += nbytes(v) * (1 + len(readers))
        calls = max(sum(map(self.runs_kernel, members)) - 1, 0)
        return Score(kept * c.seconds_per_byte, calls * c.call_seconds, self.recomputed(members) * c.op_seconds)

    def recomputed(self, members: frozenset[int]) -> float:
        """Light element-ops done again because inlined producers are read more than once."""
        if len(members) == 1 or self.row_mode(members):
            return 0.0
        expression: dict[int, float] = {}
        extra = 0.0
        for i in sorted(members):
            inner = [self.ix.producer[id(v)] for v in self.ix.g.nodes[i].inputs
                     if self.ix.producer.get(id(v)) in members]
            inlined = [p for p in inner if fusion_kind(self.ix.g.nodes[p]) != OUT_FUSABLE]
            expression[i] = self.work(i) + sum(expression[p] for p in inlined)
        for i in members:
            reads = [c for v in self.ix.g.nodes[i].outputs for c in self.ix.consumers.get(id(v), []) if c in members]
            if len(reads) > 1 and fusion_kind(self.ix.g.nodes[i]) != OUT_FUSABLE:
                extra += (len(reads) - 1) * expression[i]
        return extra

    def kernel_latency(self, members: frozenset[int]) -> float:
        """The model's latency of one kernel running `members`: a call, its bytes in and out, its work."""
        if not any(map(self.runs_kernel, members)):
            return 0.0
        ix, c = self.ix, self.costs
        made = {id(v) for i in members for v in ix.g.nodes[i].outputs}
        reads = {id(v): v for i in members for v in ix.g.nodes[i].inputs if id(v) not in made}
        moved = sum(map(nbytes, reads.values())) + sum(map(nbytes, ix.escaping(members)))
        work = sum(self.work(i) for i in members) + self.recomputed(members)
        return c.call_seconds + moved * c.seconds_per_byte + work * c.op_seconds

    def plan_latency(self, groups: list[frozenset[int]]) -> float:
        """The latency-evaluator: the model's seconds for the plan, its kernels one after another."""
        return sum(self.kernel_latency(grp) for grp in groups)
