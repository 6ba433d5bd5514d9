"""Per-kernel profile of a compiled module: where an inference's time goes, and how close each kernel runs to the
machine's ceilings.

The library of a module has, beside `tg_run`, `tg_run_profiled` (`codegen/entry.py`), which reads a monotonic
clock around each kernel call and adds the nanoseconds to one counter per call site, and those of the whole run
to one more. `profile_run` calls it `warmup + repeats` times and keeps the run of the median wall time, whole (a
sum of per-site medians is no run's, and read 190% of the latency on a busy machine): its sites' times and the
time between them add up to its wall time. It also times the plain `tg_run` on the same arguments, so the
report shows the clock's own overhead. Each site's FLOPs and bytes (its inputs and outputs) come from the
module's spec, written when it was compiled; its GFLOP/s and GB/s are read against the FMA peak and bandwidth
`peaks.measured_peaks` measured on this machine. A kernel faster than `CEILING_SLACK` times the cached peak means
the peak was measured too low: it is measured again, and if a kernel still beats it, the kernel's own rate is the
ceiling of this report (a peak is what code can reach).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

from ..errors import ModuleFormatError
from .dims import Extent
from .kernel import BufferSpec, Kernel
from .peaks import MachinePeaks, measured_peaks
from .timing import time_kernel

PROFILED_ENTRY = "tg_run_profiled"
CEILING_SLACK = 1.03  # timing noise a kernel may show above the measured peak before the peak is doubted

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class KernelSite:
    """One kernel call of a module's entry, in call order: its C function, its label (ops and output shape, as
    `tilegrad tune --list-tasks` names tasks), its floating-point work and the bytes of its inputs and outputs."""

    function: str
    label: str
    flops: int | Extent  # a formula of the dynamic dimensions in a module that has them (`at` evaluates it)
    bytes: int | Extent

    def at(self, values) -> KernelSite:
        """The site's work where the dynamic dimensions have `values` (their keys -> ints)."""
        count = (lambda n: n.at(values) if isinstance(n, Extent) else n)
        return KernelSite(self.function, self.label, count(self.flops), count(self.bytes))

    def to_json(self) -> dict:
        return {"function": self.function, "label": self.label,
                **{k: n.to_json() if isinstance(n, Extent) else n for k, n in (("flops", self.flops),
                                                                               ("bytes", self.bytes))}}

    @staticmethod
    def from_json(row: dict) -> KernelSite:
        if not (isinstance(row, dict) and isinstance(row.get("function"), str) and isinstance(row.get("label"), str)
                and all(type(row.get(k)) is int or isinstance(row.get(k), dict) for k in ("flops", "bytes"))):
            raise TypeError(f"kernel site {row!r} lacks a function, a label, flops or bytes")
        count = (lambda n: Extent.from_json(n) if isinstance(n, dict) else n)
        return KernelSite(row["function"], row["label"], count(row["flops"]), count(row["bytes"]))


@dataclasses.dataclass(frozen=True)
class ProfileRow:
    """A call site (calls 1) or all sites of one label: seconds per inference, its share, and its rates."""

    label: str
    function: str  # the C function; "" in a row of several sites
    calls: int
    seconds: float
    share: float  # of the profiled run's wall time
    flops: int
    bytes: int
    gflops: float
    gbs: float
    fma_fraction: float  # gflops / the machine's FMA peak
    bandwidth_fraction: float  # gbs / the machine's bandwidth


@dataclasses.dataclass(frozen=True)
class Profile:
    """Time per kernel of one module on one set of inputs, against `peaks`: of `repeats` instrumented runs, the
    one of the median wall time (the entry's own clock), whole, so that its kernels' times and the time between
    them add up to its wall time (`profiled_s`), and the shares to 100%."""

    sites: tuple[ProfileRow, ...]  # in call order
    peaks: MachinePeaks
    latency_s: float  # median of the un-instrumented entry
    profiled_s: float  # the profiled run's wall time in the entry (clock reads and output copies included)
    repeats: int
    outputs: tuple[np.ndarray, ...]  # of the last profiled run

    @property
    def kernels_s(self) -> float:
        """The kernels' time in the profiled run."""
        return sum(r.seconds for r in self.sites)

    def by_label(self) -> list[ProfileRow]:
        """One row per kernel label (its sites summed), slowest first."""
        groups: dict[str, list[ProfileRow]] = {}
        for r in self.sites:
            groups.setdefault(r.label, []).append(r)
        rows = [_row(label, "", sum(r.seconds for r in rs), sum(r.flops for r in rs), sum(r.bytes for r in rs),
                     self.profiled_s, self.peaks, calls=len(rs)) for label, rs in groups.items()]
        return sorted(rows, key=lambda r: -r.seconds)

    def table(self, top: int | None = None) -> str:
        """The report, as ONNX Runtime's profile summary reads: a header (machine, peaks, latencies), the call
        sites slowest first (the `top` of them, or all), then the time per kernel label."""
        p = self.peaks
        total, run = self.kernels_s, self.profiled_s
        header = (f"machine: {p.cpu}, {p.isa}, {p.threads} threads; FMA peak {p.fma_gflops:.1f} GFLOP/s, "
                  f"bandwidth {p.bandwidth_gbs:.1f} GB/s")
        latency = (f"latency: {_ms(self.latency_s)} ms un-instrumented (median of {self.repeats}); the profiled run "
                   f"(the median of {self.repeats} instrumented): {_ms(run)} ms = kernels {_ms(total)} ms "
                   f"({total / run:.1%}) + between them {_ms(run - total)} ms ({(run - total) / run:.1%})")
        lines = [header, latency, "", f"{'#':>3} {'kernel':<44} {'function':<28} {_RATES_HEADER}"]
        ranked = sorted(enumerate(self.sites), key=lambda ir: -ir[1].seconds)
        for i, r in ranked[:top]:
            lines.append(f"{i:>3} {fit_label(r.label, 44):<44} {fit_name(r.function, 28):<28} {_rates(r)}")
        if top is not None and len(ranked) > top:
            rest = sum(r.seconds for _, r in ranked[top:])
            lines.append(f"    ({len(ranked) - top} more kernels: {_ms(rest)} ms, {rest / run:.1%})")
        lines += ["", f"{'kernel label':<48} {'calls':>5} {_RATES_HEADER}"]
        lines += [f"{fit_label(r.label, 48):<48} {r.calls:>5} {_rates(r)}" for r in self.by_label()[:top]]
        return "\n".join(lines)

    def to_json(self) -> dict:
        """The profile as JSON-ready data (the outputs left out)."""
        return {"machine": dataclasses.asdict(self.peaks), "repeats": self.repeats, "latency_s": self.latency_s,
                "profiled_s": self.profiled_s, "kernels_s": self.kernels_s,
                "kernels": [dataclasses.asdict(r) for r in self.sites],
                "by_label": [dataclasses.asdict(r) for r in self.by_label()]}


def profile_run(entry: Kernel, sites: Sequence[KernelSite], arrays: Sequence[np.ndarray],
                outputs: Sequence[np.ndarray], *, repeats: int, warmup: int,
                peaks: MachinePeaks | None = None) -> Profile:
    """Profile the module whose `tg_run` is `entry`, called on `arrays` (its arguments, `outputs` among them):
    `warmup` untimed runs, then `repeats` timed ones; `peaks` default to this machine's, measured once and
    cached."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"profile needs repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    if not sites:
        raise ModuleFormatError(f"the module in {entry.library} records no kernel call sites (saved by an "
                                f"earlier version?); compile it again to profile it")
    clocks = np.zeros(len(sites) + 1, np.int64)  # each call's nanoseconds, then the whole run's
    profiled = Kernel(entry.library, PROFILED_ENTRY, [*entry.params, BufferSpec("clocks", clocks.shape, "int64")],
                      cfg=entry.cfg)
    args = [*arrays, clocks]
    for _ in range(warmup):
        profiled(*args)
    per_run = []
    for _ in range(repeats):
        clocks[:] = 0
        profiled(*args)
        per_run.append(clocks.copy())
    run = per_run[int(np.argsort([c[-1] for c in per_run])[(repeats - 1) // 2])] / 1e9
    seconds = run[:-1]
    instrumented = float(run[-1]) or float(seconds.sum())  # 0: a library saved before the entry timed itself
    result_outputs = tuple(o.copy() for o in outputs)
    latency = time_kernel(entry, arrays, warmup=1, repeats=repeats, min_repeat_s=0.005).median
    fastest = max((s.flops / t / 1e9 for s, t in zip(sites, seconds) if t > 0), default=0.0)
    peaks = peaks or ceiling_above(fastest, entry.num_threads)
    rows = tuple(_row(s.label, s.function, float(t), s.flops, s.bytes, instrumented, peaks)
                 for s, t in zip(sites, seconds))
    return Profile(rows, peaks, latency, instrumented, repeats, result_outputs)


def ceiling_above(gflops: float, threads: int) -> MachinePeaks:
    """This machine's peaks on `threads`, measured again when a kernel ran at `gflops`, above `CEILING_SLACK` times
    the cached FMA peak; if it still beats the new measurement, the peaks with the kernel's rate as the FMA peak
    (not cached: a one-off figure, which the peaks' `how` says)."""
    peaks = measured_peaks(threads)
    if gflops <= CEILING_SLACK * peaks.fma_gflops:
        return peaks
    _log.warning("a kernel ran at %.1f GFLOP/s, above the cached FMA peak of %.1f: measuring the peak again",
                 gflops, peaks.fma_gflops)
    peaks = measured_peaks(threads, remeasure=True)
    if gflops <= CEILING_SLACK * peaks.fma_gflops:
        return peaks
    return dataclasses.replace(peaks, fma_gflops=gflops, how=f"a kernel's rate in this profile, above the measured "
                               f"{peaks.fma_gflops:.1f} GFLOP/s ({peaks.how})")


def fit_label(label: str, width: int) -> str:
    """A kernel label (`ops[shape]`) in `width` characters: whole op names, the middle ones left out ("+…+")
    where they do not fit, and the shape always."""
    if len(label) <= width:
        return label
    ops, bracket, shape = label.partition("[")
    names, tail = ops.split("+"), bracket + shape
    first, rest = names[0], names[1:]
    while rest and len(first) + len("+…+") + len("+".join(rest)) + len(tail) > width:
        rest = rest[1:]
    text = f"{first}+…+{'+'.join(rest)}{tail}" if rest else f"{first}+…{tail}"
    return text if len(text) <= width else fit_name(label, width)


def fit_name(name: str, width: int) -> str:
    """`name` in `width` characters: its start and its end, "…" between, where it is longer."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return f"{name[:head]}…{name[len(name) - (width - 1 - head):]}"


def _row(label: str, function: str, seconds: float, flops: int, nbytes: int, total: float, peaks: MachinePeaks,
         calls: int = 1) -> ProfileRow:
    gflops = flops / seconds / 1e9 if seconds > 0 else 0.0
    gbs = nbytes / seconds / 1e9 if seconds > 0 else 0.0
    return ProfileRow(label, function, calls, seconds, seconds / total if total > 0 else 0.0, flops, nbytes, gflops,
                      gbs, gflops / peaks.fma_gflops, gbs / peaks.bandwidth_gbs)


_RATES_HEADER = f"{'ms':>8} {'share':>6} {'GFLOP/s':>8} {'%peak':>6} {'GB/s':>7} {'%bw':>6}"


def _rates(r: ProfileRow) -> str:
    """A row's time, share and rates, under `_RATES_HEADER`."""
    return (f"{_ms(r.seconds):>8} {r.share:>6.1%} {r.gflops:>8.2f} {r.fma_fraction:>6.1%} {r.gbs:>7.2f} "
            f"{r.bandwidth_fraction:>6.1%}")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"
