"""What a module's library says about itself, for C callers: `tg_info`, the layout of `tg_run`'s arguments.

`tg_run(void** args)` takes the inputs, the outputs, the weights and the workspace, in that order, with shapes
compiled in, and after them the values of the dynamic dimensions where the module has any. A program that loads
the library without Python (`tilegrad.h`, the C API) needs the same facts the manifest gives the Python runtime:
each buffer's name, element type and shape, the dynamic dimensions with their bounds, the workspace's size, and
which weights the library derives from a stored source (`DerivedWeight`) with which of its functions. They are
compiled into the library as one constant structure, whose layout and version `tilegrad.h` declares: both are read
from the header, so the two cannot drift apart. A dynamic dimension is -1 in a shape (and so are the bytes of a
buffer it sizes); `tg_shapes`, a function of the dimensions' values compiled from the shapes' formulas (`Extent`),
gives every input's and output's shape at a call's values.
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
                f"{_nbytes(s)}, {itemsize(s.dtype)}}}," for i, s in enumerate(specs)]
        lines.append(f"static const tg_buffer_info tg_{group}[] = {{\n" + ("\n".join(rows) or "  {0}") + "\n};")
    rows = [f"  {{{d.weight}, {_c_string(d.kernel)}}}," for d in derived]
    lines.append("static const tg_derived_info tg_derived[] = {\n" + ("\n".join(rows) or "  {0}") + "\n};")
    rows = [f"  {{{_c_string(d.name)}, {d.lo}, {d.hi}}}," for d in spec.dims]
    lines.append("static const tg_dim_info tg_dims[] = {\n" + ("\n".join(rows) or "  {0}") + "\n};")
    lines.append(_shapes_function(spec))
    lines.append(f"const tg_model_info tg_info = {{TG_INFO_VERSION, {len(inputs)}, {len(outputs)}, {len(weights)}, "
                 f"{len(derived)}, {len(spec.dims)}, tg_inputs, tg_outputs, tg_weights, tg_sources, tg_derived, "
                 f"tg_dims, tg_shapes, {max(spec.workspace_bytes, 1)}}};")
    return "\n".join(lines) + "\n"


def _shapes_function(spec) -> str:
    """`tg_shapes(dims, out)`: every input's dimensions, then every output's, at the dimensions' values `dims`."""
    index = {d.key: k for k, d in enumerate(spec.dims)}
    extents = [d for s in (*spec.inputs, *spec.outputs) for d in s.shape]
    body = "".join(f"  out[{k}] = {_c_extent(d if isinstance(d, int) else d.tree, index)};\n"
                   for k, d in enumerate(extents))
    return ("static inline int64_t tg_floordiv(int64_t a, int64_t b) { int64_t q = a / b; return q - ((a % b != 0) && "
            "((a < 0) != (b < 0))); }\n"
            "static void tg_shapes(const int64_t* dims, int64_t* out) {\n  (void)dims, (void)out;\n" + body + "}")


def _c_extent(tree, index: dict[str, int]) -> str:
    """An extent's formula (`runtime.dims.Extent.tree`) as a C expression of `dims`, in Python's integer
    arithmetic (floor division and a modulo of the divisor's sign)."""
    if isinstance(tree, int):
        return str(tree)
    if isinstance(tree, str):
        return f"dims[{index[tree]}]"
    op, a, b = tree[0], _c_extent(tree[1], index), _c_extent(tree[2], index)
    if op in ("+", "-", "*"):
        return f"({a} {op} {b})"
    if op == "//":
        return f"tg_floordiv({a}, {b})"
    if op == "%":
        return f"({a} - {b} * tg_floordiv({a}, {b}))"
    return f"({a} {'<' if op == 'min' else '>'} {b} ? {a} : {b})"


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
