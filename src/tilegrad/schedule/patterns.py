"""The kernel shapes the default rules recognise before they schedule: an element-wise epilogue fused onto a heavy
op (`epilogue_anchor`), and a row-wise chain such as softmax or layer norm (`row_axes`). The CPU and GPU drivers
both ask them, so a kernel is read the same way on every target."""

from __future__ import annotations

from ..te import expr as E
from .rules import HEAVY_TAGS, INJECTIVE_TAGS, RULES, Anchor
from .schedule import Schedule
from .state import Stage


def epilogue_anchor(sch: Schedule, s: Stage) -> Anchor | None:
    """The anchor of an element-wise epilogue `s`: a conv, matmul or window op of the same shape that only `s`
    reads, element by element (directly or through inlined element-wise stages). A copy-out anchor (no
    reduction) is inlined here; a reduction becomes the accumulator."""
    if s.op.reduce_axes or s.op.tag not in INJECTIVE_TAGS:
        return None
    found: list[Stage] = []
    if not _identity_reads(sch, s, found) or len({p.name for p in found}) != 1:
        return None
    p = found[0]
    if p.tensor.shape != s.tensor.shape:
        return None
    if any(r.attach != "inline" and r is not s for r in sch.state.readers(p.tensor)):
        return None
    if p.op.reduce_axes:
        return Anchor(p.op.tag, dict(p.op.attrs), p.name)
    sch.compute_inline(p.name)
    return Anchor(p.op.tag, dict(p.op.attrs))


def _identity_reads(sch: Schedule, stage: Stage, found: list, identity: bool = True) -> bool:
    """Collect the non-inlined stages `stage` reads, looking through inlined ones; False if a heavy one is read
    anywhere but at the reader's own indices (a transposing or broadcasting read is not an epilogue)."""
    names = {st.name: st for st in sch.state.stages}
    own = tuple(stage.op.axes)
    stack = [stage.op.body]
    while stack:
        x = stack.pop()
        stack.extend(x.children())
        p = names.get(x.buffer.name) if type(x) is E.Load else None
        if p is None:
            continue
        same = identity and _same_element(x.indices, own, p.tensor.shape)
        if p.attach == "inline":
            if not _identity_reads(sch, p, found, same):
                return False
        elif p.op.tag in HEAVY_TAGS or p.op.tag in RULES:
            if not same:
                return False
            found.append(p)
    return True


def _same_element(indices, axes, shape) -> bool:
    """Whether a read at `indices` is of the reader's own element (an axis of extent 1 may read index 0)."""
    return len(indices) == len(axes) and all(
        i == a or (n == 1 and type(i) is E.Const and i.value == 0) for i, a, n in zip(indices, axes, shape))


def row_axes(sch: Schedule) -> int | None:
    """How many leading axes of the (single) output a row-wise schedule runs over: the chain of a softmax,
    layer norm or a fused reduction with its element-wise consumers, whose reductions all keep those leading
    axes. None when the kernel is not such a chain."""
    if len(sch.state.outputs) != 1:
        return None
    out = sch.state.stage(sch.state.outputs[0].name)
    if out.op.reduce_axes:
        return None
    if "row_axes" in out.op.attrs:  # the last stage of a row-wise op declares how many leading axes are rows
        return out.op.attrs["row_axes"]
    if out.op.tag not in INJECTIVE_TAGS or len(out.op.axes) < 2:
        return None
    shape = out.tensor.shape
    reductions = [st for st in sch.state.stages if st.op.reduce_axes]
    if not reductions or any(r.op.tag in HEAVY_TAGS or r.op.tag in RULES for r in sch.state.stages):
        return None
    rows = len(shape) - 1
    for r in reductions:
        k = 0
        while k < min(len(r.tensor.shape), rows) and r.tensor.shape[k] == shape[k]:
            k += 1
        rows = min(rows, k)
    return rows if rows >= 1 else None
