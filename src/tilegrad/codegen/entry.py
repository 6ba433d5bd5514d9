"""The entry point of a compiled model: one C function that calls every kernel over the static memory plan.

`tg_run(void** args)` takes the model's inputs, its outputs, its weights and one workspace buffer. Each kernel
call passes the data pointers of its node's inputs and outputs, as C expressions over `args` (a slot); outputs no
kernel writes are copied in at the end. `tg_run_profiled` is the same with a monotonic clock read around each
kernel call, in a translation unit of its own, so `tg_run` carries no timing code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class KernelCall(NamedTuple):
    function: str  # the kernel's C name
    pointers: Sequence[str]  # a slot per parameter: its inputs, then its outputs


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
    declarations = [f"void {c.function}(void** args);" for c in calls]
    body = [f"  {{ void* a[] = {{{', '.join(c.pointers)}}}; {c.function}(a); }}" for c in calls]
    body += [f"  memcpy({c.target}, {c.source}, {c.nbytes});" for c in copies]
    return ("#include <string.h>\n" + "\n".join(declarations) + "\nvoid tg_run(void** args) {\n"
            + "\n".join(body) + "\n}\n")


def render_profiled_entry(calls: Sequence[KernelCall], copies: Sequence[OutputCopy], clock_slot: int) -> str:
    """The C source of `tg_run_profiled(void** args)`: `tg_run` that adds the nanoseconds of kernel call `i` to
    `((int64_t*)args[clock_slot])[i]`, one more argument after `tg_run`'s, so it has the ABI of every kernel."""
    declarations = [f"void {c.function}(void** args);" for c in calls]
    body = [f"  {{ void* a[] = {{{', '.join(c.pointers)}}}; {c.function}(a); }} "
            f"u = tg_now(); ns[{i}] += u - t; t = u;" for i, c in enumerate(calls)]
    body += [f"  memcpy({c.target}, {c.source}, {c.nbytes});" for c in copies]
    return ("#define _POSIX_C_SOURCE 199309L\n#include <stdint.h>\n#include <string.h>\n#include <time.h>\n"
            + "".join(f"{d}\n" for d in declarations)
            + "static int64_t tg_now(void) {\n  struct timespec c;\n  clock_gettime(CLOCK_MONOTONIC, &c);\n"
            "  return (int64_t)c.tv_sec * 1000000000 + c.tv_nsec;\n}\n"
            f"void tg_run_profiled(void** args) {{\n  int64_t* ns = (int64_t*)args[{clock_slot}];\n"
            "  int64_t t = tg_now(), u;\n" + "".join(f"{b}\n" for b in body) + "}\n")
