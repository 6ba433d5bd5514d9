"""What a module's library says about itself, for C callers: `tg_info`, the layout of `tg_run`'s arguments.

`tg_run(void** args)` takes the inputs, the outputs, the weights and the workspace, in that order, with shapes
compiled in (a dynamic dimension is -1, and its buffer's bytes too: `tilegrad.h` does not run such a module yet).
A program that loads the library without Python (`tilegrad.h`, the C API) needs the same facts the manifest gives
the Python runtime: each buffer's name, element type and shape, the workspace's size, and which weights the library
derives from a stored source (`DerivedWeight`) with which of its functions. They are compiled into the library as
one constant structure, whose layout and version `tilegrad.h` declares: both are read from the header, so the two
cannot drift apart.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

from ..dtype import itemsize


def render_descriptor(spec) -> str:
    """The C source of `tg_info` for a module's spec (`runtime.module.ModuleSpec`)."""
    inputs, outputs, weights, derived = spec.inputs, spec.outputs, spec.weights, spec.derived
    groups = {"inputs": inputs, "outputs": outputs, "weights": weights, "sources": [d.source for d in derived]}
    lines = ["#include <stdint.h>", _types()]
    for group, specs in groups.items():
        for i, s in enumerate(specs):
            shape = [d if isinstance(d, int) else -1 for d in s.shape]
            lines.append(f"static const int64_t tg_{group}_shape{i}[] = {{{', '.join(map(str, shape)) or '0'}}};")
        rows = [f"  {{{_c_string(s.name)}, {_c_string(s.dtype)}, {len(s.shape)}, tg_{group}_shape{i}, "
                f"{_nbytes(s)}}}," for i, s in enumerate(specs)]
        lines.append(f"static const tg_buffer_info tg_{group}[] = {{\n" + ("\n".join(rows) or "  {0}") + "\n};")
    rows = [f"  {{{d.weight}, {_c_string(d.kernel)}}}," for d in derived]
    lines.append("static const tg_derived_info tg_derived[] = {\n" + ("\n".join(rows) or "  {0}") + "\n};")
    lines.append(f"const tg_model_info tg_info = {{TG_INFO_VERSION, {len(inputs)}, {len(outputs)}, {len(weights)}, "
                 f"{len(derived)}, tg_inputs, tg_outputs, tg_weights, tg_sources, tg_derived, "
                 f"{max(spec.workspace_bytes, 1)}}};")
    return "\n".join(lines) + "\n"


def _nbytes(s) -> int:
    """A buffer's bytes; -1 where a dynamic dimension sizes it (the C API refuses such a module)."""
    if not all(isinstance(d, int) for d in s.shape):
        return -1
    return math.prod(s.shape) * itemsize(s.dtype)


def _c_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII is a C string literal


HEADER = Path(__file__).resolve().parents[1] / "include" / "tilegrad.h"  # the C API, which declares the layout


@functools.cache
def _types() -> str:
    """The version and the structures of `tg_info`, as the C API's header declares them (from the version's
    definition to the layout's end marker)."""
    text = HEADER.read_text()
    return text[text.index("#define TG_INFO_VERSION"):text.index("/* tg_info's layout: end */")]
