"""The graph `compile(db=)` builds, confirmed by timing whole graphs.

`algorithms.choose` picks each convolution's algorithm and layout block by summing kernel latencies measured one
kernel at a time, with warm caches and no neighbours. Inside the model the sum is off (a kernel reads what its
producer left in cache, or not; layout transforms run between blocked and unblocked kernels), enough for a tuned
model to run slower than the untuned one (docs/tuning.md has the figures). So after tuning, `confirm_graph`
compiles the estimate's pick and the default graph with the tuned schedules, and the default graph untuned,
times them end to end, interleaved, and stores the fastest one's choice in the records database under a digest of
the imported graph; `chosen_graph` builds that choice when it finds one, and falls back to the estimate otherwise.
A tuning run whose records make the model slower (timed on a busy machine, say) thus leaves compile(db=) building
the untuned model: tuning never costs speed.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..executor import compile_graph
from ..ir.graph import Graph, format_graph
from ..passes.attention_form import AUTO
from .algorithms import STITCH, Variant, build_variant, choose
from .apply import BestRecords

UNTUNED = "untuned"  # the label of the default graph with its default schedules


@dataclass(frozen=True)
class GraphDecision:
    """The whole-graph timings (seconds, median of interleaved rounds) of the candidates, by label, and the
    label chosen."""

    seconds: dict[str, float]
    chosen: str

    def summary(self) -> str:
        return "whole graph confirmed: " + ", ".join(
            f"{label} {s * 1e3:.2f} ms" for label, s in self.seconds.items()) + f" -> {self.chosen}"


def graph_digest(imported: Graph, opt_level: int = 2, disable: Sequence[str] = (), enable: Sequence[str] = ()) -> str:
    """A digest of the imported graph's structure (not its weights' values) and the pass options."""
    text = f"{format_graph(imported)}\n{opt_level} {sorted(disable)} {sorted(enable)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class GraphPick:
    """The graph compile(db=) builds, and whether its kernels take their schedules from the records (False where
    the untuned model ran fastest end to end)."""

    variant: Variant
    tuned: bool = True


def chosen_graph(imported: Graph, chooser: BestRecords, *, fusion_plans: bool = False, attention_form: str = AUTO,
                 attention_key_block: int | None = None, **passes) -> GraphPick:
    """The graph to compile: the confirmed choice stored for this graph, else `choose`'s estimate. A stitched
    graph is a candidate only with `fusion_plans` (compile's fusion="stitch"); an attention form other than
    AUTO is kept whatever the records say."""
    decision = chooser.db.graph_choice(graph_digest(imported, **passes))
    if decision is not None and (fusion_plans or decision.get("fusion", "rules") == "rules"):
        form = decision.get("attention_form", AUTO) if attention_form == AUTO else attention_form
        return GraphPick(build_variant(imported, decision["choice"], fusion=decision.get("fusion", "rules"),
                                       attention_form=form, attention_key_block=attention_key_block, **passes),
                         tuned=decision.get("chosen") != UNTUNED)
    return GraphPick(choose(imported, chooser.latency, fusion_plans=fusion_plans, attention_form=attention_form,
                            attention_key_block=attention_key_block, **passes))


def confirm_graph(imported: Graph, db, *, fusion_plans: bool = False, rounds: int = 7, **passes) -> GraphDecision:
    """Time the default graph untuned and with the tuned schedules of `db`, and `choose`'s pick (when it
    differs), end to end; store the fastest one's choice, and return the timings."""
    with BestRecords(db) as chooser:
        default = build_variant(imported, **passes)
        candidates = {UNTUNED: default, "default": default}
        estimate = choose(imported, chooser.latency, fusion_plans=fusion_plans, **passes)
        if (estimate.choice != default.choice or estimate.algorithm == STITCH
                or estimate.attention_form != AUTO):
            candidates["estimate"] = estimate
        modules = {label: compile_graph(v.graph, choose=None if label == UNTUNED else chooser)
                   for label, v in candidates.items()}
        times: dict[str, list[float]] = {label: [] for label in modules}
        for _ in range(rounds):
            for label, module in modules.items():
                time.sleep(0.2)  # let the other module's threads go idle
                times[label].append(module.benchmark(repeats=3))
        seconds = {label: statistics.median(ts) for label, ts in times.items()}
        chosen = min(seconds, key=seconds.get)
        winner = candidates[chosen]
        chooser.db.set_graph_choice(graph_digest(imported, **passes), {
            "choice": None if chosen == "default" else winner.choice,
            "fusion": "stitch" if winner.algorithm == STITCH else "rules", "attention_form": winner.attention_form,
            "seconds": seconds, "chosen": chosen})
        return GraphDecision(seconds, chosen)
