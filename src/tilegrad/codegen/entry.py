"""The entry point of a compiled model: one C function that calls every kernel over the static memory plan.

`tg_run(void** args)` takes the model's inputs, its outputs, its weights and one workspace buffer. It opens one
parallel region, in which every thread calls each kernel's team function in turn (codegen/team.py: each kernel
ends at a barrier, so the next one reads finished outputs). Each kernel call passes the data pointers of its
node's inputs and outputs, as C expressions over `args` (a slot); outputs no kernel writes are copied in at the
end. `tg_run_profiled` is the same with a monotonic clock read by thread 0 after each kernel, in a translation
unit of its own, so `tg_run` carries no timing code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .team import TEAM


class KernelCall(NamedTuple):
    function: str  # the kernel's C name
    pointers: Sequence[str]  # a slot per parameter: its inputs, then its outputs
    parallel: bool = True  # whether it has a parallel loop


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
    body = [f"  {_call(c)}" for c in calls]
    begin, end = _team(calls)
    return ("#include <stdint.h>\n#include <string.h>\n" + TEAM + _declarations(calls)
            + f"void tg_run(void** args) {{\n  {begin}\n" + "\n".join(body) + f"\n  {end}\n"
            + _copies(copies) + "}\n")


def render_profiled_entry(calls: Sequence[KernelCall], copies: Sequence[OutputCopy], clock_slot: int) -> str:
    """The C source of `tg_run_profiled(void** args)`: `tg_run` that adds the nanoseconds of kernel call `i` to
    `((int64_t*)args[clock_slot])[i]`, one more argument after `tg_run`'s, so it has the ABI of every kernel."""
    body = [f"  {_call(c)} if (tg->tid == 0) {{ u = tg_now(); ns[{i}] += u - t; t = u; }}"
            for i, c in enumerate(calls)]
    return ("#define _POSIX_C_SOURCE 199309L\n#include <stdint.h>\n#include <string.h>\n#include <time.h>\n"
            + TEAM + _declarations(calls)
            + "static int64_t tg_now(void) {\n  struct timespec c;\n  clock_gettime(CLOCK_MONOTONIC, &c);\n"
            "  return (int64_t)c.tv_sec * 1000000000 + c.tv_nsec;\n}\n"
            f"void tg_run_profiled(void** args) {{\n  int64_t* ns = (int64_t*)args[{clock_slot}];\n"
            f"  {_team(calls)[0]}\n  int64_t t = tg_now(), u;\n" + "".join(f"{b}\n" for b in body)
            + f"  {_team(calls)[1]}\n" + _copies(copies) + "}\n")


def _team(calls: Sequence[KernelCall]) -> tuple[str, str]:
    """What opens and closes the calls' team: one parallel region, or, where no kernel has a parallel loop, a team
    of one (no region: nothing to wake, and a process forked later does not hang in libgomp's first region)."""
    if any(c.parallel for c in calls):
        return "TG_TEAM_BEGIN", "TG_TEAM_END"
    return "{ TG_TEAM_ALONE", "}"


def _declarations(calls: Sequence[KernelCall]) -> str:
    return "".join(f"void {c.function}_team(void** args, tg_team* tg);\n" for c in calls)


def _call(c: KernelCall) -> str:
    return f"{{ void* a[] = {{{', '.join(c.pointers)}}}; {c.function}_team(a, tg); }}"


def _copies(copies: Sequence[OutputCopy]) -> str:
    return "".join(f"  memcpy({c.target}, {c.source}, {c.nbytes});\n" for c in copies)
