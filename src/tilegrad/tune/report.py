"""The tuning report: a page that shows what a tuning run bought and where each kernel stands against the machine.

`write_report(directory, ...)` renders plain data into `directory/index.html` with matplotlib PNGs beside it: the
best-so-far whole-model estimate against wall-clock seconds and against candidates measured, a table of the tasks
(untuned and tuned latency, GFLOP/s, share of the FMA peak), and a roofline of the kernels. `WriteReport` is the
callback that collects that data during a run and writes the page when the run ends, normally or not, so an
interrupted run still leaves a page for what it did.

The machine's peaks come from outside (`machine.measured_peaks()` in the CLI): any object with the attributes
`cpu`, `isa`, `threads`, `fma_gflops` and `bandwidth_gbs`.
"""

from __future__ import annotations

import dataclasses
import datetime
import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..dtype import itemsize
from ..extras import require
from .graph_choice import UNTUNED
from .tuning_run import Callback

if TYPE_CHECKING:
    from .graph_choice import GraphDecision
    from .results import TaskResult
    from .tuning_run import TuningRun

BEST_VS_TIME = "best_vs_time.png"
BEST_VS_MEASURED = "best_vs_measured.png"
ROOFLINE = "roofline.png"
HEADINGS = ["#", "task", "weight", "MFLOP", "untuned ms", "tuned ms", "speed-up", "GFLOP/s", "% of FMA peak",
            "candidates measured"]
TABLE_NOTE = ("Latencies of one kernel call; the estimate is the sum of weight x latency over the tasks of the default "
              "graph (tasks of other convolution algorithms, in parentheses, do not count).")
STYLE = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:nth-child(2){text-align:left}")


class Peaks(Protocol):
    """What the roofline and the share of peak are drawn against (`machine.MachinePeaks`)."""

    cpu: str
    isa: str
    threads: int
    fma_gflops: float
    bandwidth_gbs: float


@dataclasses.dataclass(frozen=True)
class TaskRow:
    """One task of the report: `bytes_moved` is what its kernel reads and writes at least (inputs and outputs);
    `counted` whether it is a kernel of the default graph, which the whole-model estimate sums (not one of another
    convolution algorithm's)."""

    label: str
    weight: int
    flops: int
    bytes_moved: int
    untuned_s: float
    tuned_s: float
    trials: int
    counted: bool = True

    @classmethod
    def of(cls, result: TaskResult) -> TaskRow:
        task = result.task
        label = task.name if not task.algorithm else f"({task.algorithm}) {task.name}"
        values = [*task.node.inputs, *task.node.outputs]
        moved = sum(math.prod(v.shape) * itemsize(v.dtype) for v in values)
        return cls(label, task.weight, task.flops, moved, result.default_s, result.best_s, result.trials,
                   counted=not task.algorithm)

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved: where the kernel sits on the roofline's x axis."""
        return self.flops / self.bytes_moved if self.bytes_moved else math.nan

    def gflops(self, seconds: float) -> float:
        return self.flops / seconds / 1e9 if 0 < seconds < math.inf else math.nan

    @property
    def speedup(self) -> float:
        return self.untuned_s / self.tuned_s if 0 < self.tuned_s < math.inf else math.nan


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """The header of the page. `history` holds (seconds since the start, candidates measured, estimated
    whole-model latency in seconds), from before the first round on."""

    model: str
    policy: str
    budget: str
    date: str
    history: Sequence[tuple[float, int, float]]
    measured: Mapping[str, float] | None = None
    """Whole models timed after the run (seconds, by label: `graph_choice.GraphDecision.seconds`), if they were."""
    chosen: str | None = None
    peers: Mapping[str, tuple[float | None, str]] | None = None
    """Other runtimes timed in the same rounds (`GraphDecision.peers`)."""


class WriteReport(Callback):
    """Writes the report of the run into `directory` when it ends (`write_report`), and again with the whole
    models' timings once `tilegrad.tune` has them."""

    def __init__(self, directory: str | Path, peaks: Peaks, model: str):
        self.directory = Path(directory)
        self.peaks = peaks
        self.model = model
        self._date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        self._start: list[tuple[float, int, float]] = []  # the estimate before the first round

    def started(self, run: TuningRun) -> None:
        self._start = [(run.elapsed(), run.done, run.estimate())]

    def finished(self, run: TuningRun) -> None:
        self._summary = RunSummary(self.model, run.policy.name, budget_text(run.options.trials, run.options.budget),
                                   self._date, [*self._start, *run.history])
        self._rows = [TaskRow.of(r) for r in run.task_results()]
        write_report(self.directory, self._summary, self._rows, self.peaks)

    def graph_confirmed(self, decision: GraphDecision) -> None:
        """The page again, with the whole models' timings; its plots are unchanged (drawing them takes seconds
        of the budget)."""
        summary = dataclasses.replace(self._summary, measured=decision.seconds, chosen=decision.chosen,
                                      peers=decision.peers)
        (self.directory / "index.html").write_text(_page(summary, self._rows, self.peaks))


def budget_text(trials: int | None, budget: float | None) -> str:
    parts = ([f"{trials} candidates"] if trials is not None else []) + ([f"{budget:g} s"] if budget is not None else [])
    return " or ".join(parts)


def write_report(directory: str | Path, summary: RunSummary, rows: Sequence[TaskRow], peaks: Peaks) -> Path:
    """Write `directory/index.html` and its PNGs; returns the page's path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _plot_history(directory / BEST_VS_TIME, summary.history, 0, "wall-clock seconds since the start")
    _plot_history(directory / BEST_VS_MEASURED, summary.history, 1, "candidates measured")
    _plot_roofline(directory / ROOFLINE, rows, peaks)
    page = directory / "index.html"
    page.write_text(_page(summary, rows, peaks))
    return page


def _figure():
    # a Figure of its own, not pyplot: no global state, no interactive backend
    Figure = require("matplotlib.figure", "tune", "the tuning report's plots").Figure

    fig = Figure(figsize=(7, 4.2), layout="constrained")
    return fig, fig.subplots()


def _plot_history(path: Path, history: Sequence[tuple[float, int, float]], x_index: int, xlabel: str) -> None:
    fig, ax = _figure()
    points = [(h[x_index], h[2] * 1e3) for h in history if math.isfinite(h[2])]
    if points:
        xs, ys = zip(*points)
        ax.plot(xs, ys, drawstyle="steps-post", marker=".")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("estimate (ms)")
    # not monotone: a best re-timed beside the one before it may turn out slower than its first timing
    ax.set_title("whole-model estimate: sum of weight x best latency (re-timed bests may raise it)")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=100)


def _plot_roofline(path: Path, rows: Sequence[TaskRow], peaks: Peaks) -> None:
    """Each task twice, untuned (hollow) and tuned (filled) joined by an arrow, under min(peak, bandwidth x
    intensity). Tasks without arithmetic (copies, layout changes) have no place on it."""
    fig, ax = _figure()
    placed = [(i, r) for i, r in enumerate(rows) if r.flops > 0 and r.bytes_moved > 0]
    ridge = peaks.fma_gflops / peaks.bandwidth_gbs
    xs = [r.intensity for _, r in placed] + [ridge]
    lo, hi = min(xs) / 10, max(xs) * 10
    grid = [lo * (hi / lo) ** (k / 100) for k in range(101)]
    ax.plot(grid, [min(peaks.fma_gflops, peaks.bandwidth_gbs * x) for x in grid], color="black",
            label=f"min({peaks.fma_gflops:.0f} GFLOP/s, {peaks.bandwidth_gbs:.0f} GB/s x intensity)")
    for i, r in placed:
        before, after = r.gflops(r.untuned_s), r.gflops(r.tuned_s)
        if math.isfinite(before) and math.isfinite(after):
            ax.annotate("", xy=(r.intensity, after), xytext=(r.intensity, before),
                        arrowprops={"arrowstyle": "->", "color": "tab:gray"})
        ax.scatter([r.intensity], [before], facecolors="none", edgecolors="tab:blue")
        ax.scatter([r.intensity], [after], color="tab:orange")
        ax.annotate(str(i), (r.intensity, after), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.scatter([], [], facecolors="none", edgecolors="tab:blue", label="untuned")
    ax.scatter([], [], color="tab:orange", label="tuned (number: the task's row)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs / byte of inputs and outputs)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofline")
    ax.legend(fontsize=8, loc="upper left")  # above the ceiling, where no kernel can be
    ax.grid(alpha=0.3, which="both")
    fig.savefig(path, dpi=100)


def _peer_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """A row per other runtime timed with the whole models: its time and the chosen module's speed against it
    (above 1: tilegrad faster), with the untuned module's beside it; or why it was not timed."""
    rows = []
    for label, (seconds, why) in (summary.peers or {}).items():
        if seconds is None:
            rows.append((label, why))
            continue
        ours = summary.measured[summary.chosen]
        rows.append((label, f"{_ms(seconds)} ms in the same rounds: compile(db=) runs {seconds / ours:.2f}x its "
                            f"speed (untuned {seconds / summary.measured[UNTUNED]:.2f}x)"))
    return rows


def _table_cells(i: int, r: TaskRow, peaks: Peaks) -> list[str]:
    """One row of the page's table, formatted: #, task, weight, MFLOP, untuned ms, tuned ms, speed-up, GFLOP/s,
    % of the FMA peak, candidates measured."""
    gflops = r.gflops(r.tuned_s)
    return [str(i), r.label, str(r.weight), f"{r.flops / 1e6:.3f}", _ms(r.untuned_s), _ms(r.tuned_s),
            _number(r.speedup, "{:.2f}x"), _number(gflops, "{:.2f}"),
            _number(100 * gflops / peaks.fma_gflops, "{:.1f}%"), str(r.trials)]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}" if math.isfinite(seconds) else "failed"


def _number(x: float, spec: str) -> str:
    return spec.format(x) if math.isfinite(x) else "n/a"


def _page(summary: RunSummary, rows: Sequence[TaskRow], peaks: Peaks) -> str:
    esc = html.escape
    header = [("model", summary.model), ("CPU", peaks.cpu), ("ISA", peaks.isa), ("threads", str(peaks.threads)),
              ("peaks", f"{peaks.fma_gflops:.1f} GFLOP/s FMA, {peaks.bandwidth_gbs:.1f} GB/s"),
              ("policy", summary.policy), ("budget", summary.budget), ("date", summary.date)]
    estimates = [h for h in summary.history if math.isfinite(h[2])]
    if estimates:
        measured = max(h[1] for h in summary.history)
        searched = (f"{estimates[0][2] * 1e3:.3f} ms -> {estimates[-1][2] * 1e3:.3f} ms after {measured} "
                    f"candidates in {summary.history[-1][0]:.0f} s")
        header.append(("search's estimate", searched))
    untuned = sum(r.weight * r.untuned_s for r in rows if r.counted)
    tuned = sum(r.weight * r.tuned_s for r in rows if r.counted)
    header.append(("table's estimate", f"untuned {_ms(untuned)}, tuned {_ms(tuned)} (ms)"))
    if summary.measured:
        timed = ", ".join(f"{label} {_ms(s)}" for label, s in summary.measured.items())
        header.append(("whole model measured", f"{timed} (ms) -> {summary.chosen} built by compile(db=)"))
        for label, estimate in (("untuned", untuned), ("default", tuned)):
            if label in summary.measured and math.isfinite(estimate):
                header.append((f"estimate / measured ({label})", f"{estimate / summary.measured[label]:.2f}"))
        header += _peer_rows(summary)
    lines = ["<!DOCTYPE html>", '<html><head><meta charset="utf-8">',
             f"<title>tilegrad tuning report: {esc(summary.model)}</title>", f"<style>{STYLE}</style></head><body>",
             f"<h1>Tuning report: {esc(summary.model)}</h1>", "<table>"]
    lines += [f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in header]
    lines += ["</table>", "<h2>Best so far (the estimate rises where a re-timing finds a best slower than its first timing)</h2>", f'<img src="{BEST_VS_TIME}" alt="estimate against seconds">',
              f'<img src="{BEST_VS_MEASURED}" alt="estimate against candidates measured">', "<h2>Tasks</h2>",
              f"<p>{TABLE_NOTE}</p>",
              '<table class="tasks">', "<tr>" + "".join(f"<th>{h}</th>" for h in HEADINGS) + "</tr>"]
    lines += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _table_cells(i, r, peaks)) + "</tr>"
              for i, r in enumerate(rows)]
    lines += ["</table>", "<h2>Roofline</h2>", f'<img src="{ROOFLINE}" alt="roofline of the kernels">',
              "</body></html>", ""]
    return "\n".join(lines)
