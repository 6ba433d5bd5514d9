"""The graph `compile(db=)` builds, confirmed by timing whole graphs.

`algorithms.choose` picks each convolution's algorithm and layout block by summing kernel latencies measured one
kernel at a time, with warm caches and no neighbours. Inside the model the sum is off (a kernel reads what its
producer left in cache, or not; layout transforms run between blocked and unblocked kernels), enough for a tuned
model to run slower than the untuned one (docs/tuning.md has the figures). So after tuning, `confirm_graph`
compiles the estimate's pick and the default graph with the tuned schedules, and the default graph untuned,
times them end to end, interleaved, and stores the fastest one's choice in the records database under a digest of
the imported graph; `chosen_graph` builds that choice when it finds one, and falls back to the estimate otherwise.
A tuning run whose records make the model slower (timed on a busy machine, say) thus leaves compile(db=) building
the untuned model: a tuned model that timed slower end to end than the untuned one is not installed. A module
with dynamic dimensions has one graph; `confirm_dynamic` times it with and without the records at the sample
points of its dimensions, and `records_chosen` tells compile(dynamic=, db=) whether to replay them.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..executor import compile_graph
from ..runtime.build import build_workers
from ..runtime.module import Module
from ..ir.graph import Graph, format_graph
from ..passes.attention_form import AUTO
from ..peers import Peer
from .algorithms import STITCH, Variant, build_variant, choose
from .apply import BestRecords

UNTUNED = "untuned"  # the label of the default graph with its default schedules
ROUNDS, MIN_ROUNDS = 7, 3  # interleaved rounds of the whole-graph timing, without a budget and at least
MAX_ROUNDS = 40  # with a budget, the rounds go on while it lasts: its remainder buys a surer choice
PAUSE_S = 0.2  # between two modules' timings, so the last one's threads go idle
MIN_REPEAT_S = 0.05


@dataclass(frozen=True)
class GraphDecision:
    """The whole-graph timings (seconds, median of interleaved rounds) of the candidates, by label, and the
    label chosen; `peers`, other runtimes timed in the same rounds (seconds, or None with why not: peers.py)."""

    seconds: dict[str, float]
    chosen: str
    peers: dict[str, tuple[float | None, str]] = field(default_factory=dict)

    def summary(self) -> str:
        timed = [f"{label} {s * 1e3:.2f} ms" for label, s in self.seconds.items()]
        timed += [f"{label} {s * 1e3:.2f} ms" for label, (s, _) in self.peers.items() if s is not None]
        return "whole graph confirmed: " + ", ".join(timed) + f" -> {self.chosen}"


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


@dataclass(frozen=True)
class Untuned:
    """The default graph compiled with its default schedules, before tuning: the confirmation's baseline, and
    what its compile and call cost, from which the time the confirmation will take is foretold."""

    module: Module
    compile_s: float  # with its libraries in the build cache, as they usually are: the passes and the code
    latency_s: float  # of one call; of one call at each sample point together, for a dynamic module
    points: int = 1  # the sample points each round times a dynamic module at

    def confirmation_s(self, build_s: float, peers: int = 0) -> float:
        """About how long `confirm_graph` takes with this baseline: two more compiles, one of them building every
        kernel anew (`build_s` each: the kernels share a few C files, and one retuned kernel rebuilds its file;
        the files build `build_workers` at a time, `runtime.build.build_many`), and ROUNDS rounds of the three
        modules and of `peers` other runtimes (taken to be as fast). The rebuild is foretold from the start, not
        once a kernel is retuned: else the search runs on until the forecast jumps past the deadline and leaves
        nothing for the final confirmation."""
        rebuild_s = len(self.module.spec.kernels) * build_s / build_workers()
        rounds_s = ROUNDS * (3 + peers) * (PAUSE_S + 5 * self.points * max(self.latency_s / self.points,
                                                                            MIN_REPEAT_S))
        return 2 * self.compile_s + rebuild_s + rounds_s


def compile_untuned(imported: Graph, **passes) -> Untuned:
    start = time.monotonic()
    module = compile_graph(build_variant(imported, **passes).graph)
    compiled = time.monotonic()
    return Untuned(module, compiled - start, module.benchmark(repeats=1, min_repeat_s=0.0))


def compile_untuned_dynamic(graph: Graph, points: Sequence[Mapping[str, int]]) -> Untuned:
    """The dynamic module of `graph` (optimised, its dimensions symbolic) with its default schedules, and one
    call's latency at each of `points` (dimension -> value) together."""
    start = time.monotonic()
    module = compile_graph(graph)
    compiled = time.monotonic()
    latency = sum(module.benchmark(repeats=1, min_repeat_s=0.0, dims=p) for p in points)
    return Untuned(module, compiled - start, latency, len(points))


def confirm_dynamic(graph: Graph, digest: str, db, points: Sequence[Mapping[str, int]], *,
                    untuned: Untuned | None = None, deadline: float | None = None) -> GraphDecision:
    """Time the dynamic module of `graph` untuned and with the records of `db`, at every one of `points` in each
    of the interleaved rounds (as `confirm_graph`, `deadline` too), by the sum of a call at each point: what a
    server that sees the points equally often spends. Store which was faster under `digest` (the imported
    graph's, `graph_digest`), so that compile(dynamic=, db=) replays the records only where they paid."""
    untuned = untuned or compile_untuned_dynamic(graph, points)
    with BestRecords(db) as chooser:
        modules = {UNTUNED: untuned.module, "tuned": compile_graph(graph, choose=chooser)}
        times = _interleaved_rounds({label: lambda m=m: sum(m.benchmark(repeats=3, min_repeat_s=MIN_REPEAT_S, dims=p)
                                                            for p in points) for label, m in modules.items()},
                                    deadline)
        seconds = {label: statistics.median(ts) for label, ts in times.items()}
        chosen = min(seconds, key=seconds.get)
        chooser.db.set_graph_choice(digest, {"choice": None, "fusion": "rules", "seconds": seconds,
                                             "chosen": chosen})
        return GraphDecision(seconds, chosen)


def records_chosen(imported: Graph, chooser: BestRecords, **passes) -> bool:
    """Whether compile(dynamic=, db=) replays the records on the graph of `imported`: unless `confirm_dynamic`
    timed the module faster without them."""
    decision = chooser.db.graph_choice(graph_digest(imported, **passes))
    return decision is None or decision.get("chosen") != UNTUNED


def confirm_graph(imported: Graph, db, *, fusion_plans: bool = False, untuned: Untuned | None = None,
                  deadline: float | None = None, peers: Mapping[str, Peer] | None = None,
                  **passes) -> GraphDecision:
    """Time the default graph untuned (`untuned`, compiled now if not given) and with the tuned schedules of
    `db`, and `choose`'s pick (when it differs), end to end, in interleaved rounds, with `peers` (other
    runtimes, by label) timed in the same rounds; store the fastest module's choice, and return the timings.
    Without a `deadline` (monotonic clock) ROUNDS rounds; with one, rounds until the next would end past it
    (MIN_ROUNDS at least, MAX_ROUNDS at most), so that the budget ends where it was asked to, the time the
    forecasts left over spent on a surer choice."""
    untuned = untuned or compile_untuned(imported, **passes)
    with BestRecords(db) as chooser:
        default = build_variant(imported, **passes)
        candidates = {UNTUNED: default, "default": default}
        estimate = choose(imported, chooser.latency, fusion_plans=fusion_plans, **passes)
        if (estimate.choice != default.choice or estimate.algorithm == STITCH
                or estimate.attention_form != AUTO):
            candidates["estimate"] = estimate
        modules = {label: untuned.module if label == UNTUNED else compile_graph(v.graph, choose=chooser)
                   for label, v in candidates.items()}
        peer_times: dict[str, list[float]] = {label: [] for label in peers or {}}
        why_not: dict[str, str] = {}

        def time_peers() -> None:
            for label in [p for p in peer_times if p not in why_not]:
                time.sleep(PAUSE_S)
                seconds, why = peers[label](untuned.module.spec.inputs)
                if seconds is None:
                    why_not[label] = why
                else:
                    peer_times[label].append(seconds)

        times = _interleaved_rounds({label: lambda m=m: m.benchmark(repeats=3, min_repeat_s=MIN_REPEAT_S)
                                     for label, m in modules.items()}, deadline, time_peers)
        seconds = {label: statistics.median(ts) for label, ts in times.items()}
        chosen = min(seconds, key=seconds.get)
        winner = candidates[chosen]
        chooser.db.set_graph_choice(graph_digest(imported, **passes), {
            "choice": None if chosen == "default" else winner.choice,
            "fusion": "stitch" if winner.algorithm == STITCH else "rules", "attention_form": winner.attention_form,
            "seconds": seconds, "chosen": chosen})
        timed_peers = {label: (statistics.median(ts), "") if ts else (None, why_not[label])
                       for label, ts in peer_times.items()}
        return GraphDecision(seconds, chosen, timed_peers)


def _interleaved_rounds(timers: Mapping[str, Callable[[], float]], deadline: float | None,
                        also: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """Each of `timers` (label -> a timing in seconds) once per round, after a pause that lets the last one's
    threads go idle, then `also`; ROUNDS rounds without a `deadline`, else until the next round would end past it
    (MIN_ROUNDS at least, MAX_ROUNDS at most). Returns each label's timings."""
    times: dict[str, list[float]] = {label: [] for label in timers}
    for done in range(ROUNDS if deadline is None else MAX_ROUNDS):
        started = time.monotonic()
        for label, timer in timers.items():
            time.sleep(PAUSE_S)
            times[label].append(timer())
        if also is not None:
            also()
        if deadline is not None and done + 1 >= MIN_ROUNDS and 2 * time.monotonic() - started > deadline:
            break
    return times
