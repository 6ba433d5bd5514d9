"""FusionStitching's explorer: a search over fusion plans scored by what each pattern saves.

1. Patterns. Vertices are visited in post order (consumers first). A vertex's candidate patterns come from
   PatternReduction over its consumers' candidates: the consumers are split into groups of GROUP_SIZE, each
   combination within a group (each consumer left out or one of its candidates) is joined with the vertex, the best
   K per group are kept, then the groups' bests are combined pairwise, keeping the best K overall. A pattern also
   takes the producers whose every reader is in it (the other operand chain of an add), so patterns are not only
   trees below one vertex. Each pattern is checked by `fusion_rules.refusal` (buildable by the fused-kernel
   lowering, not cyclic) and scored by the delta-evaluator (`stitch_cost.py`); refusals are kept for --explain.
2. Plans. A beam search (width BEAM_WIDTH) over the vertices in topological order chooses, at each vertex not yet
   covered, the vertex alone or a candidate pattern containing it, less the nodes already decided (if that is still
   buildable), keeping the plans of highest total score whose
   patterns do not overlap and whose kernels do not depend on each other in a cycle. The latency-evaluator ranks
   the final beam.
3. Remote fusion. Independent element-wise kernels with the same parallel extent (output elements), or all small
   (outputs up to HORIZONTAL_MAX_ELEMENTS, where the call dominates), as if read by one virtual producer, are
   packed into one kernel (at most PACK_MAX), when packing leaves the kernels acyclic: each saves a call, which is
   what the delta-evaluator gives a pack.
4. Build. Each kernel becomes a `fused` node exactly as the rule-based pass builds them (`fuse.emit_fused`), and
   its composition scheme is recorded (PassContext.decisions["stitch"], and the notes):
   - kernel packing: several independent groups, one loop nest each, one call;
   - thread composition: element-wise producers inlined into their readers, recomputed per element (a conv's or
     matmul's epilogue is this on its register tile);
   - block composition: a reduction read inside the kernel is a sub-root, computed once per row block inside the
     one parallel loop over rows, its shared producers kept per row, reused by its consumers.
   The schedule is the default rules' (`schedule/defaults.py`), which schedule exactly the sub-roots (reductions,
   each rfactored into vector lanes) and the root (the row loop, parallel and vectorised) and place everything else
   by compute_at/inline from them; tuning enumerates the same two levels.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math

from ..ir.graph import Graph
from ..ir.registry import INJECTIVE, OPAQUE, OUT_FUSABLE, REDUCTION
from .editor import GraphEditor
from .fuse import emit_fused, strategy
from .fusion_rules import HORIZONTAL_MAX_ELEMENTS, GraphIndex, fusion_kind, refusal
from .context import PassContext
from .stitch_cost import NOMINAL, Evaluator, FusionCosts

K = 3  # candidate patterns kept per vertex
GROUP_SIZE = 3  # consumers whose candidates are combined exhaustively
BEAM_WIDTH = 3
PACK_MAX = 4  # groups packed into one kernel at most
REFUSALS_NOTED = 3  # refused patterns --explain lists per vertex

PACKING, THREAD, BLOCK, SINGLE = "kernel packing", "thread composition", "block composition", "single op"


@dataclasses.dataclass(frozen=True)
class Plan:
    """Non-overlapping patterns (every node in exactly one, most of them alone) and their total score."""

    groups: tuple[frozenset[int], ...]
    score: float


class Explorer:
    """Candidate patterns per vertex, then plans, over one graph."""

    def __init__(self, g: Graph, costs: FusionCosts):
        self.ix = GraphIndex(g)
        self.evaluator = Evaluator(self.ix, costs)
        self.kinds = [fusion_kind(n) for n in g.nodes]
        self.refused: dict[int, list[tuple[frozenset[int], str]]] = {}
        self._verdicts: dict[frozenset[int], str | None] = {}
        self._scores: dict[frozenset[int], float] = {}

    # --- 1. patterns ---------------------------------------------------------------------------------------

    def candidates(self) -> dict[int, list[frozenset[int]]]:
        """The best K patterns of every vertex (the vertex alone among them), post order."""
        cands: dict[int, list[frozenset[int]]] = {}
        for v in reversed(range(len(self.ix.g.nodes))):
            cands[v] = [frozenset({v})] if self.kinds[v] == OPAQUE else self._pattern_reduction(v, cands)
        return cands

    def _pattern_reduction(self, v: int, cands: dict[int, list[frozenset[int]]]) -> list[frozenset[int]]:
        alone = frozenset({v})
        consumers = [c for c in self.ix.readers_of(v) if self.kinds[c] != OPAQUE]
        best = [alone]
        for start in range(0, len(consumers), GROUP_SIZE):
            chunk = consumers[start:start + GROUP_SIZE]
            options = [[frozenset()] + cands[c] for c in chunk]
            in_group = self._top(v, (alone.union(*combo) for combo in itertools.product(*options)))
            best = self._top(v, (a | b for a in best for b in in_group))
        if self.kinds[v] == OUT_FUSABLE:
            best = self._top(v, best + [p | q for p in best for q in self._normalisations(p, cands)])
        return best

    def _normalisations(self, p: frozenset[int], cands: dict[int, list[frozenset[int]]]) -> list[frozenset[int]]:
        """The candidates of the readers outside `p` that reduce rows (hold a reduction): joined with a product's
        pattern they are its epilogue's row normalisation, which their own patterns could not take while the
        epilogue's value also leaves (a pre-norm residual sum read later: the product kernel's second output)."""
        readers = sorted({r for i in p for r in self.ix.readers_of(i) if r not in p and self.kinds[r] != OPAQUE})
        return [q for r in readers for q in cands[r] if any(self.kinds[i] == REDUCTION for i in q)]

    def _top(self, v: int, patterns) -> list[frozenset[int]]:
        """The K best buildable patterns among `patterns` (each first closed upwards), the vertex alone always."""
        alone = frozenset({v})
        kept = {alone}
        for p in patterns:
            p = self._close_upwards(p)
            if p not in kept and self.verdict(p, v) is None:
                kept.add(p)
        ranked = sorted(kept, key=lambda p: (-self.score(p), sorted(p)))
        top = ranked[:K]
        return top if alone in top else top[:K - 1] + [alone]

    def _close_upwards(self, p: frozenset[int]) -> frozenset[int]:
        """`p` with the element-wise producers all of whose readers are in it, while it stays buildable."""
        grown = True
        while grown:
            grown = False
            for i in sorted(p):
                for u in self.ix.producers_of(i):
                    if u in p or self.kinds[u] != INJECTIVE or not set(self.ix.readers_of(u)) <= p:
                        continue
                    if self.verdict(p | {u}) is None:
                        p, grown = p | {u}, True
        return p

    def verdict(self, p: frozenset[int], v: int | None = None) -> str | None:
        """Why `p` cannot be one kernel (None: it can); refusals found for vertex `v` are kept for --explain."""
        if p not in self._verdicts:
            self._verdicts[p] = refusal(self.ix, p)
            reason = self._verdicts[p]
            if reason is not None and v is not None and len(self.refused.setdefault(v, [])) < REFUSALS_NOTED:
                self.refused[v].append((p, reason))
        return self._verdicts[p]

    def score(self, p: frozenset[int]) -> float:
        if p not in self._scores:
            self._scores[p] = self.evaluator.delta(p).total
        return self._scores[p]

    # --- 2. plans ------------------------------------------------------------------------------------------

    def plans(self, cands: dict[int, list[frozenset[int]]]) -> list[Plan]:
        """The beam's plans after the last vertex, best score first."""
        containing: dict[int, list[frozenset[int]]] = {}
        for p in sorted({p for ps in cands.values() for p in ps if len(p) > 1}, key=sorted):
            for i in p:
                containing.setdefault(i, []).append(p)
        beam = [(0.0, (), {})]  # (score, groups, node -> its group)
        for v in range(len(self.ix.g.nodes)):
            grown = []
            for score, groups, group_of in beam:
                if v in group_of:
                    grown.append((score, groups, group_of))
                    continue
                alone = frozenset({v})
                grown.append((score, groups + (alone,), group_of))  # a node alone needs no entry
                for p in self._starting_at(v, containing.get(v, []), group_of):
                    grown.append((score + self.score(p), groups + (p,), {**group_of, **dict.fromkeys(p, p)}))
            grown.sort(key=lambda s: -s[0])
            beam, seen = [], set()
            for s in grown:
                key = frozenset(s[1])
                if key not in seen and len(beam) < BEAM_WIDTH:
                    seen.add(key)
                    beam.append(s)
        return [Plan(groups, score) for score, groups, _ in beam]

    def _starting_at(self, v: int, patterns: list[frozenset[int]], group_of: dict) -> list[frozenset[int]]:
        """The candidates containing `v`, less the nodes already decided (covered, or before `v`), that are
        still buildable, worth fusing and acyclic with the groups chosen so far."""
        out = []
        for p in dict.fromkeys(frozenset(i for i in p if i >= v and i not in group_of) for p in patterns):
            if len(p) > 1 and self.verdict(p) is None and self.score(p) > 0 and not self._closes_cycle(p, group_of):
                out.append(p)
        return out

    def _closes_cycle(self, p: frozenset[int], group_of: dict[int, frozenset[int]]) -> bool:
        """Whether a path leaves `p` and returns to it through the groups chosen so far."""
        last = max(p)
        stack = [c for i in p for c in self.ix.readers_of(i) if c not in p]
        seen: set[frozenset[int]] = set()
        while stack:
            i = stack.pop()
            grp = group_of.get(i, frozenset({i}))
            if grp in seen or min(grp) > last:
                continue
            seen.add(grp)
            for j in grp:
                for c in self.ix.readers_of(j):
                    if c in p:
                        return True
                    stack.append(c)
        return False

    # --- 3. remote fusion ----------------------------------------------------------------------------------

    def pack(self, groups: tuple[frozenset[int], ...]) -> list[tuple[frozenset[int], ...]]:
        """The plan's groups as kernels: independent element-wise groups of one parallel extent (output elements),
        or all small, packed."""
        kernels: list[list[frozenset[int]]] = [[grp] for grp in groups]
        open_packs: dict[int, list[frozenset[int]]] = {}
        for grp in sorted(groups, key=min):
            extent = self._parallel_extent(grp)
            if extent is None:
                continue
            pack = open_packs.get(extent)
            if pack is not None and len(pack) < PACK_MAX:
                trial = [k for k in kernels if k != [grp] and k is not pack]
                trial.append(pack + [grp])
                if _acyclic(self.ix, trial):
                    kernels = [k for k in kernels if k != [grp]]
                    pack.append(grp)
                    continue
            open_packs[extent] = next(k for k in kernels if k == [grp])
        return [tuple(k) for k in kernels]

    def _parallel_extent(self, grp: frozenset[int]) -> int | None:
        """What a group packs by: the elements of its output (0 for every small one), or None when it is not
        packed (not element-wise, or it runs no kernel)."""
        if any(self.kinds[i] != INJECTIVE for i in grp) or not any(map(self.evaluator.runs_kernel, grp)):
            return None
        out = self.ix.escaping(grp)
        if len(out) != 1:
            return None
        extent = math.prod(out[0].shape)
        return 0 if extent <= HORIZONTAL_MAX_ELEMENTS else extent


def _acyclic(ix: GraphIndex, kernels: list[list[frozenset[int]]]) -> bool:
    return _kernel_order(ix, kernels) is not None


def _kernel_order(ix: GraphIndex, kernels) -> list[int] | None:
    """Indices of `kernels` (each a list of groups of node positions) in a dependence order, ties by first node;
    None when they depend on each other in a cycle."""
    owner = {i: k for k, groups in enumerate(kernels) for grp in groups for i in grp}
    preds: list[set[int]] = [set() for _ in kernels]
    for i, k in owner.items():
        for p in ix.producers_of(i):
            if owner[p] != k:
                preds[k].add(owner[p])
    first = [min(min(grp) for grp in groups) for groups in kernels]
    succs: list[list[int]] = [[] for _ in kernels]
    for k, ps in enumerate(preds):
        for p in ps:
            succs[p].append(k)
    ready = sorted((first[k], k) for k, ps in enumerate(preds) if not ps)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(k)
        for s in succs[k]:
            preds[s].discard(k)
            if not preds[s]:
                heapq.heappush(ready, (first[s], s))
    return order if len(order) == len(kernels) else None


def scheme_of(ev: Evaluator, groups: tuple[frozenset[int], ...]) -> str:
    """The composition scheme the kernel of `groups` runs with (module docstring)."""
    if len(groups) > 1:
        return PACKING
    (grp,) = groups
    if len(grp) == 1:
        return SINGLE
    return BLOCK if ev.row_mode(grp) else THREAD


@strategy("stitch")
def stitch(g: Graph, ctx: PassContext) -> Graph:
    """Fuse by the explorer's best plan (the fuse pass with options["fusion"] = "stitch"). The beam's plans are
    ranked by the latency model, or by options["rank_plans"] (their graphs -> latencies: the tuner measures)."""
    explorer = Explorer(g, ctx.options.get("fusion_costs") or NOMINAL)
    ev = explorer.evaluator
    cands = explorer.candidates()
    plans = explorer.plans(cands)
    packed = [explorer.pack(p.groups) for p in plans]
    rank = ctx.options.get("rank_plans")
    if rank is None:
        how, latencies = "model", [ev.plan_latency(list(p.groups)) for p in plans]
    else:
        how, latencies = "measured", list(rank([_build(g, PassContext(), explorer, k) for k in packed]))
    best = min(range(len(plans)), key=lambda k: latencies[k])
    for k, (plan, latency) in enumerate(zip(plans, latencies)):
        ctx.note(f"plan {k + 1}{' (chosen)' if k == best else ''}: score {plan.score * 1e6:.1f}us, "
                 f"{how} latency {latency * 1e6:.1f}us, {len(packed[k])} kernels and views")
    return _build(g, ctx, explorer, packed[best], cands)


def _build(g: Graph, ctx: PassContext, explorer: Explorer, kernels: list[tuple[frozenset[int], ...]],
           cands: dict[int, list[frozenset[int]]] | None = None) -> Graph:
    """The graph running `kernels`, its decisions and notes in `ctx`; with the explorer's `cands`, the notes say
    what else each kernel's nodes could have been part of, and which patterns were refused and why."""
    ev, ix = explorer.evaluator, explorer.ix
    decisions = ctx.decisions.setdefault("stitch", {})
    ed = GraphEditor(g)
    for k in _kernel_order(ix, [list(groups) for groups in kernels]):
        groups = kernels[k]
        positions = sorted(i for grp in groups for i in grp)
        nodes = [g.nodes[i] for i in positions]
        if len(nodes) == 1:
            ed.keep(nodes[0])
            continue
        outputs = [v for grp in sorted(groups, key=min) for v in ix.escaping(grp)]
        name = emit_fused(ed, nodes, outputs, len(groups))
        scheme = scheme_of(ev, groups)
        sub_roots = [g.nodes[i].name for i in positions if ev.op_class(i) == REDUCTION]
        decisions[name] = {"scheme": scheme, "sub_roots": sub_roots}
        scores = "; ".join(str(ev.delta(grp)) for grp in groups)
        ctx.note(f"{name} ({scheme}{', sub-roots ' + ', '.join(sub_roots) if sub_roots else ''}): "
                 f"{_ops(g, positions)}  {scores}")
        for p in _alternatives(explorer, cands or {}, groups):
            ctx.note(f"    also considered: {_ops(g, p)}  {ev.delta(p)}")
    for v, refused in sorted(explorer.refused.items()) if cands else ():
        for p, reason in refused:
            ctx.note(f"refused at {g.nodes[v].name!r}: {_ops(g, p)}: {reason}")
    return ed.finish()


def _alternatives(explorer: Explorer, cands: dict[int, list[frozenset[int]]],
                  groups: tuple[frozenset[int], ...]) -> list[frozenset[int]]:
    """The best other candidates (at most K) sharing nodes with the kernel of `groups`."""
    inside = set().union(*groups)
    others = {p for i in inside for p in cands.get(i, []) if len(p) > 1 and p not in groups}
    return sorted(others, key=lambda p: (-explorer.score(p), sorted(p)))[:K]


def _ops(g: Graph, positions) -> str:
    return "+".join(g.nodes[i].op for i in sorted(positions))
