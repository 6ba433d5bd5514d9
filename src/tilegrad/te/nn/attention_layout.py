"""Where attention's operands and output sit in memory, and how an element of the logical form is found there.

The attention compute works on the logical form: per head, a matrix of rows, (..., L, D). Exported transformers
keep Q, K and V in the projection's layout, [B, S, H*D], and split the heads by a reshape (a view) and a transpose
(a kernel that moves every activation); reading the projection's layout directly, and writing the output in the
layout the next projection reads, leaves no transpose to run. The layouts:

- "bhsd": (..., L, D), the logical form itself, leading axes broadcast as in matmul;
- "bshd": (B, L, H, D), a projection's output reshaped to heads;
- "bs3hd": (B, L, 3, H, D), a fused QKV projection's output reshaped to heads: Q reads slot 0 of its operand,
  K slot 1 and V slot 2, so the one tensor is passed as all three operands.

The output is "bhsd" (..., Lq, Dv) or "bshd" (B, Lq, H, Dv), which a reshape (a view) makes [B, Lq, H*Dv].
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ShapeError

QKV_LAYOUTS = {"bhsd": "(..., L, D)", "bshd": "(B, L, H, D)", "bs3hd": "(B, L, 3, H, D)"}
OUT_LAYOUTS = {"bhsd": "(..., Lq, Dv)", "bshd": "(B, Lq, H, Dv)"}


def logical_shape(shape: Sequence[int], layout: str, label: str) -> tuple:
    """The logical shape (..., L, D) of operand `label` ("q", "k" or "v") given in `layout`."""
    if layout not in QKV_LAYOUTS:
        raise ShapeError(f"attention: qkv_layout must be one of {', '.join(QKV_LAYOUTS)}, got {layout!r}")
    if layout == "bhsd":
        return tuple(shape)
    if len(shape) != (4 if layout == "bshd" else 5) or (layout == "bs3hd" and shape[2] != 3):
        raise ShapeError(f"attention: {label} in layout {layout!r} must be {QKV_LAYOUTS[layout]}, got shape "
                         f"{tuple(shape)}")
    b, length, *_, h, d = shape
    return b, h, length, d


def element(layout: str, slot: int, lead: Sequence, row, col) -> tuple:
    """The index, into an operand in `layout`, of element (lead..., row, col) of its logical form; `slot` is the
    operand's place among Q, K, V (0, 1, 2)."""
    if layout == "bhsd":
        return (*lead, row, col)
    b, h = lead
    return (b, row, h, col) if layout == "bshd" else (b, row, slot, h, col)


def output_shape(logical: Sequence[int], layout: str) -> tuple:
    """The shape of an output whose logical shape is (..., Lq, Dv), in `layout`."""
    if layout not in OUT_LAYOUTS:
        raise ShapeError(f"attention: out_layout must be one of {', '.join(OUT_LAYOUTS)}, got {layout!r}")
    if layout == "bhsd":
        return tuple(logical)
    if len(logical) != 4:
        raise ShapeError(f"attention: out_layout 'bshd' needs one batch and one head axis, but the output is "
                         f"{tuple(logical)}")
    b, h, lq, dv = logical
    return b, lq, h, dv


def output_element(layout: str, index: Sequence) -> tuple:
    """The logical index (..., row, col) of output element `index` in `layout`."""
    if layout == "bhsd":
        return tuple(index)
    b, row, h, col = index
    return b, h, row, col
