"""The entry point of a compiled model: one C function that calls every kernel over the static memory plan.

`tg_run(void** args)` takes the model's inputs, its outputs, its weights and one workspace buffer. It opens one
parallel region, in which every thread calls each kernel's team function in turn (codegen/team.py: each kernel ends
at a barrier, so the next one reads finished outputs). A kernel too small to be worth sharing runs on thread 0
alone, as a team of one (its barriers cost nothing); consecutive ones run back to back, and the other threads wait
for all of them at one barrier, before the next kernel they share (or at the region's end). Each kernel call passes
the data pointers of its node's inputs and outputs, as C expressions over `args` (a slot); outputs no kernel writes
are copied in at the end. `tg_run_profiled` is the same with a monotonic clock read by thread 0 after each kernel,
in a translation unit of its own, so `tg_run` carries no timing code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .team import TEAM


class KernelCall(NamedTuple):
    function: str  # the kernel's C name
    pointers: Sequence[str]  # a slot per parameter: its inputs, then its outputs
    parallel: bool = True  # whether the team shares it (it has a parallel loop worth sharing), or thread 0 runs it


class OutputCopy(NamedTuple):
    target: str  # the output's slot
    source: str  # where its bytes are
    nbytes: int


def render_entry(calls: Sequence[KernelCall], copies: Sequence[OutputCopy]) -> str:
    """The C source of `tg_run`, with the declarations of the kernels it calls. A copy onto itself means the
    output is written nowhere (its bytes would be stale memory), so it is refused."""
    for c in copies:
        if c.source == c.target:
            raise ValueError(f"output {c.target} is copied onto itself: nothing writes its bytes")
    begin, end = _team(calls)
    return ("#include <stdint.h>\n#include <string.h>\n" + TEAM + _declarations(calls)
            + f"void tg_run(void** args) {{\n  {begin}\n" + "".join(_body(calls, lambda i: ""))
            + f"  {end}\n" + _copies(copies) + "}\n")


def render_profiled_entry(calls: Sequence[KernelCall], copies: Sequence[OutputCopy], clock_slot: int) -> str:
    """The C source of `tg_run_profiled(void** args)`: `tg_run` that adds the nanoseconds of kernel call `i` to
    `((int64_t*)args[clock_slot])[i]`, and those of the whole run (the output copies included) to the element
    after the last call's, one more argument after `tg_run`'s, so it has the ABI of every kernel."""
    def clock(i: int) -> str:
        return f" {{ u = tg_now(); ns[{i}] += u - t; t = u; }}"

    body = _body(calls, lambda i: f" if (tg->tid == 0){clock(i)}" if calls[i].parallel else clock(i))
    return ("#define _POSIX_C_SOURCE 199309L\n#include <stdint.h>\n#include <string.h>\n#include <time.h>\n"
            + TEAM + _declarations(calls)
            + "static int64_t tg_now(void) {\n  struct timespec c;\n  clock_gettime(CLOCK_MONOTONIC, &c);\n"
            "  return (int64_t)c.tv_sec * 1000000000 + c.tv_nsec;\n}\n"
            f"void tg_run_profiled(void** args) {{\n  int64_t* ns = (int64_t*)args[{clock_slot}];\n"
            f"  int64_t start = tg_now();\n  {_team(calls)[0]}\n  int64_t t = tg_now(), u;\n" + "".join(body)
            + f"  {_team(calls)[1]}\n" + _copies(copies) + f"  ns[{len(calls)}] += tg_now() - start;\n}}\n")


def _team(calls: Sequence[KernelCall]) -> tuple[str, str]:
    """What opens and closes the calls' team: one parallel region, or, where no kernel has a parallel loop, a team
    of one (no region: nothing to wake, and a process forked later does not hang in libgomp's first region)."""
    if any(c.parallel for c in calls):
        return "TG_TEAM_BEGIN", "TG_TEAM_END"
    return "{ TG_TEAM_ALONE", "TG_TEAM_ALONE_END }"


def _declarations(calls: Sequence[KernelCall]) -> str:
    return "".join(f"void {c.function}_team(void** args, tg_team* tg);\n" for c in calls)


def _body(calls: Sequence[KernelCall], after) -> list[str]:
    """The lines that call each kernel, each followed by `after(i)` (on thread 0 alone where the call is not
    shared): a shared call on the team; a run of unshared ones on thread 0 as a team of one, then one barrier."""
    lines, alone = [], False
    if not all(c.parallel for c in calls):
        lines.append("  TG_TEAM_OF_ONE\n")
    for i, c in enumerate(calls):
        if c.parallel and alone:
            lines.append("  }\n  tg_barrier(tg);\n")
        elif not c.parallel and not alone:
            lines.append("  if (tg->tid == 0) {\n")
        alone = not c.parallel
        lines.append(f"{'    ' if alone else '  '}{_call(c, 'tg_one' if alone else 'tg')}{after(i)}\n")
    if alone:
        lines.append("  }\n")  # the region's end waits for it
    return lines


def _call(c: KernelCall, team: str) -> str:
    return f"{{ void* a[] = {{{', '.join(c.pointers)}}}; {c.function}_team(a, {team}); }}"


def _copies(copies: Sequence[OutputCopy]) -> str:
    return "".join(f"  memcpy({c.target}, {c.source}, {c.nbytes});\n" for c in copies)
