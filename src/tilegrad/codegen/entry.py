"""The entry point of a compiled model: one C function that calls every kernel over the static memory plan.

`tg_run(void** args)` takes the model's inputs, its outputs, its weights and one workspace buffer. Each kernel
call passes the data pointers of its node's inputs and outputs, as C expressions over `args` (a slot); outputs no
kernel writes are copied in at the end.
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
