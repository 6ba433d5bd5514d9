"""Attention forming: each softmax(Q K^T * scale + mask) V chain becomes one `attention` node, one kernel that
keeps the score matrix in per-block local buffers instead of writing it to memory.

The chain is found from its last product, `matmul(P, V)`, walking up:
- P is a `softmax` over the last axis, or its expanded form div(exp(x - reduce_max(x)), reduce_sum(exp(...))),
  possibly behind torch's safe-softmax guard `where(isnan(P), 0, P)` (the dynamo exporter's SDPA): a row whose
  every key is hidden gives zeros, as the attention kernel defines it;
- its logits x are the scores, masked at most once besides a causal mask: `add` of a mask that broadcasts to
  the scores (an input, or a constant; a constant equal to the causal pattern becomes `causal`), or
  `where(cond, fill, scores)` (or the other way round) with a fill of -inf or the lowest float, which hides the
  keys as an additive mask of `fill` does (a constant causal `cond` becomes `causal`, as GPT-2 exports it);
- the scores are `matmul(Q, K^T)` divided or multiplied by scalar constants, before the mask, on the scores or
  on Q and K^T (torch's SDPA export multiplies both by sqrt(scale));
- K^T is a transpose of the last two axes of K (possibly composed with a head split, `perm=(0, 2, 3, 1)`, and
  behind scalar multiplies and reshapes of the batch axes, as the dynamo exporter writes it); anything else
  is transposed by a new node.
Each intermediate must be read by the chain alone. A chain that breaks one of these rules is left to the other
passes, and the reason is noted for --explain.

The attention then reads Q, K, V and writes its output in the projections' layout where the chain has one, so
that the head split and merge, transposes that each move a whole activation, are no kernels of their own
(te/nn/attention_layout.py):
- Q, K and V each a head split `transpose(x, perm=(0, 2, 1, 3))` of a (B, S, H, D) tensor (K^T the transpose
  `perm=(0, 2, 3, 1)` of it) -> the op reads the (B, S, H, D) tensors (`qkv_layout="bshd"`);
- those three tensors the reshaped thirds of one fused projection (B, S, 3*H*D), sliced along its last axis in
  the order Q, K, V (a Split, as GPT-2 and the fused QKV Linear export it) -> the op reads the projection as
  (B, S, 3, H, D), a view, passed as all three operands (`qkv_layout="bs3hd"`);
- the output read only by the head merge `transpose(perm=(0, 2, 1, 3))` -> the op writes (B, Lq, H, Dv) in
  place of that transpose (`out_layout="bshd"`); the reshape to (B, Lq, H*Dv) after it is a view.
Otherwise the operands and the output keep the (..., L, D) form, as for ONNX's Attention.

Each attention's softmax form and key block come from passes/attention_form.py: by its shape, or as the options
`attention_form` and `attention_key_block` ask; `PassContext.decisions["attention"]` records them by node.

The pass runs by default (opt level 2): on every shape measured (docs/fusion.md, `benchmarks/attention.py`) the
attention kernel, whose products are register-tiled, is faster than the separate kernels it replaces.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..backend import backend_for
from ..errors import ShapeError
from ..ir.graph import Graph, Node, Value, infer_types
from ..ir.registry import TensorType
from ..te.dims import representative
from .attention_form import AUTO, FormChoice, form_of, requested
from .editor import GraphEditor
from .context import PassContext

HIDING_FILL = -1e30  # a Where fill at or below this hides a key as -inf would (finfo(float32).min is -3.4e38)


@dataclasses.dataclass
class _Keys:
    """K (..., Lk, D) as a value of the old graph, or as `source` transposed by `perm` (a new node)."""

    source: Value
    perm: tuple[int, ...] | None = None


@dataclasses.dataclass
class _Mask:
    """The additive mask: a value of the old graph (`value`), a constant (`data`), a `where(cond, fill, 0)`
    to build (`cond`, `fill`, `hide_when`), or `causal` (whose `data` is then its exact additive form, kept in
    case another mask joins it), plus a constant `extra` term."""

    value: Value | None = None
    data: np.ndarray | None = None
    cond: Value | None = None
    fill: float = 0.0
    hide_when: bool = True
    causal: bool = False
    extra: np.ndarray | None = None


@dataclasses.dataclass
class _Attention:
    """The operands as values of the old graph in `qkv_layout`, read through a reshape to `view` if one is given
    (the fused projection as (B, S, 3, H, D)); `merge` is the head-merge transpose the op writes for, if any."""

    q: Value
    keys: _Keys
    v: Value
    scale: float
    mask: _Mask | None
    qkv_layout: str = "bhsd"
    view: tuple[int, ...] | None = None
    merge: Node | None = None

    def attrs(self) -> dict:
        return {"scale": self.scale, "causal": bool(self.mask is not None and self.mask.causal),
                "qkv_layout": self.qkv_layout, "out_layout": "bhsd" if self.merge is None else "bshd"}


class _NotAttention(Exception):
    """A chain that looks like attention but breaks a rule; the message is the reason."""


def form_attention(g: Graph, ctx: PassContext) -> Graph:
    """Make each attention one kernel, so its score matrix never goes to memory."""
    form, _ = requested(ctx.options)  # a bad attention option fails even where no attention forms
    if form == AUTO and not backend_for(ctx.target).fuses_attention:
        ctx.note(f"attentions left as their products and softmax: the {ctx.target.kind} target has no schedule "
                 "for a fused attention (attention_form= asks for one)")
        return g
    finder = _Finder(g)
    ed = GraphEditor(g)
    written = set()  # id of each head-merge transpose whose output an attention writes
    for node in g.nodes:
        if id(node) in written:
            continue
        found = _found(finder, node, ctx)
        if found is None:
            ed.keep(node)
            continue
        choice = _form(node, found, ctx)
        out = _build(ed, node, found, choice)
        ctx.decisions.setdefault("attention", {})[out.name] = choice
        if found.merge is None:
            ed.replace(node.outputs[0], out)
        else:
            ed.replace(found.merge.outputs[0], out)
            written.add(id(found.merge))
        mask = "causal" if found.mask and found.mask.causal else "masked" if found.mask else "no mask"
        attrs = found.attrs()
        layouts = ("" if attrs["qkv_layout"] == attrs["out_layout"] == "bhsd" else
                   f", reading Q, K, V as {attrs['qkv_layout']} and writing {attrs['out_layout']}")
        ctx.note(f"{out.name}: attention {node.inputs[0].shape[-2:]} x {node.inputs[1].shape[-1]} ({mask}, "
                 f"scale {found.scale:.6g}) from {node.name}{layouts}; {_form_text(choice)}")
    return ed.finish()


def _form_text(choice: FormChoice) -> str:
    blocks = f" in blocks of {choice.key_block} keys" if choice.form == "blockwise" else ""
    return f"{choice.form} softmax{blocks} ({choice.why})"


def _form(node: Node, found: _Attention, ctx: PassContext) -> FormChoice:
    """The softmax form of the attention replacing `node`, the product P V: P is (..., Lq, Lk), V (..., Lk, Dv),
    and Q's last axis (its view's, for a fused projection) is D. A dynamic length is read at its representative
    value, as the schedules' choices are: read at a generous upper bound, it gave the blockwise form to a module
    whose calls are mostly short (docs/dynamic.md)."""
    (lq, lk), dv = node.inputs[0].shape[-2:], node.inputs[1].shape[-1]
    return form_of(ctx.options, ctx.target, representative(lq), representative(lk), (found.view or found.q.shape)[-1],
                   dv)


def _found(finder: _Finder, node: Node, ctx: PassContext) -> _Attention | None:
    """The attention whose last product is `node`, or None (noting why, for a chain that breaks a rule)."""
    if node.op != "matmul" or finder.softmax_input(finder.unguarded(node.inputs[0])) is None:
        return None
    try:
        return finder.match(node)
    except _NotAttention as reason:
        ctx.note(f"{node.name}: not made an attention: {reason}")
        return None


class _Finder:
    def __init__(self, g: Graph):
        self.producers = g.producers()
        self.readers = g.consumers()
        self.outputs = {id(v) for v in g.outputs}

    def _made_by(self, v: Value, *ops: str) -> Node | None:
        node = self.producers.get(id(v))
        return node if node is not None and node.op in ops else None

    def _private(self, v: Value, what: str) -> None:
        """`v` must be read by the chain's next node alone."""
        readers = self.readers.get(id(v), [])
        if id(v) in self.outputs:
            raise _NotAttention(f"the {what} {v.name!r} is a graph output")
        if len(readers) != 1:
            raise _NotAttention(f"the {what} {v.name!r} is read by {len(readers)} nodes "
                                f"({', '.join(n.name for n in readers)}), not by the chain alone")

    def unguarded(self, p: Value) -> Value:
        """The probabilities behind a safe-softmax guard `where(isnan(p), 0, p)` giving `p`, else `p` itself."""
        node = self._made_by(p, "where")
        if node is None:
            return p
        cond, fill, probs = node.inputs
        test = self._made_by(cond, "is_nan")
        if test is None or test.inputs[0] is not probs or not _is_scalar(fill) or float(fill.data.reshape(())):
            return p
        return probs

    def softmax_input(self, p: Value) -> Value | None:
        """The logits of a softmax (or its expanded form) producing `p`, else None."""
        node = self._made_by(p, "softmax", "div")
        if node is None:
            return None
        if node.op == "softmax":
            return node.inputs[0]
        exp, total = (self._made_by(v, op) for v, op in zip(node.inputs, ("exp", "reduce_sum")))
        if exp is None or total is None or total.inputs[0] is not node.inputs[0]:
            return None
        sub = self._made_by(exp.inputs[0], "sub")
        peak = sub and self._made_by(sub.inputs[1], "reduce_max")
        if not peak or peak.inputs[0] is not sub.inputs[0]:
            return None
        return sub.inputs[0]

    def match(self, node: Node) -> _Attention:
        guarded, v = node.inputs
        p = self.unguarded(guarded)
        if p is guarded:
            self._private(p, "probabilities")
        else:
            self._check_guard(guarded, p)
        self._check_softmax(p)
        logits = self.softmax_input(p)
        scores, mask = self._unmask(logits)
        if scores is not logits:
            self._private(scores, "scores")
        factor, product = 1.0, scores
        while (scaled := _scalar_scale(self._made_by(product, "mul", "div"))) is not None:
            factor *= scaled[0]
            product = scaled[1]
            self._private(product, "scores")
        if (scaled := self._made_by(product, "add", "where", "mul", "div")) is not None:
            raise _NotAttention(f"the scores are scaled or masked in an unsupported order ({scaled.name}: "
                                f"{scaled.op}); only a scale before one mask is recognised")
        qk = self._made_by(product, "matmul")
        if qk is None:
            raise _NotAttention(f"the logits {product.name!r} are not a matmul of Q and K^T")
        q, q_factor = self._unscale(qk.inputs[0])
        keys, k_factor = self._keys(qk.inputs[1])
        found = self._projection_layout(node, _Attention(q, keys, v, factor * q_factor * k_factor, mask))
        self._check_types(node, found)
        return found

    def _projection_layout(self, node: Node, found: _Attention) -> _Attention:
        """`found` reading Q, K, V before their head splits (a fused projection before its split too) and
        writing its output before the head merge, where the chain has them."""
        found = dataclasses.replace(found, merge=self._head_merge(node.outputs[0]))
        q, v = self._head_split(found.q), self._head_split(found.v)
        if found.keys.perm is None:
            k = self._head_split(found.keys.source)
        else:
            k = found.keys.source if found.keys.perm == (0, 2, 1, 3) else None
        if q is None or k is None or v is None:
            return found
        fused = self._fused_projection(q, k, v)
        if fused is not None:
            b, s, h, d = q.shape
            return dataclasses.replace(found, q=fused, keys=_Keys(fused), v=fused, qkv_layout="bs3hd",
                                       view=(b, s, 3, h, d))
        return dataclasses.replace(found, q=q, keys=_Keys(k), v=v, qkv_layout="bshd")

    def _head_split(self, v: Value) -> Value | None:
        """The (B, S, H, D) tensor whose head split `transpose(perm=(0, 2, 1, 3))` is `v`, else None."""
        node = self._made_by(v, "transpose")
        return node.inputs[0] if node is not None and _swaps_heads(node) else None

    def _head_merge(self, out: Value) -> Node | None:
        """The head merge `transpose(perm=(0, 2, 1, 3))` that alone reads the attention's output, else None."""
        readers = self.readers.get(id(out), [])
        if id(out) in self.outputs or len(readers) != 1 or readers[0].op != "transpose":
            return None
        return readers[0] if _swaps_heads(readers[0]) else None

    def _fused_projection(self, q: Value, k: Value, v: Value) -> Value | None:
        """The fused projection (B, S, 3*H*D) whose last axis, cut in three (Q, K, V in that order) and each
        part reshaped to (B, S, H, D), gives `q`, `k` and `v`; else None."""
        if not q.shape == k.shape == v.shape:
            return None
        b, s, h, d = q.shape
        sources = []
        for slot, part in enumerate((q, k, v)):
            reshape = self._made_by(part, "reshape")
            cut = reshape and self._made_by(reshape.inputs[0], "slice")
            if not cut or _last_axis_part(cut) != (slot * h * d, (slot + 1) * h * d):
                return None
            sources.append(cut.inputs[0])
        fused = sources[0]
        if any(x is not fused for x in sources) or fused.shape != (b, s, 3 * h * d):
            return None
        return fused

    def _check_guard(self, guarded: Value, p: Value) -> None:
        """The guard and its NaN test read by the chain alone, the probabilities by the guard and the test."""
        self._private(guarded, "guarded probabilities")
        guard = self.producers[id(guarded)]
        test = self.producers[id(guard.inputs[0])]
        self._private(test.outputs[0], "NaN test")
        readers = self.readers.get(id(p), [])
        if id(p) in self.outputs or len(readers) != 2 or {id(n) for n in readers} != {id(guard), id(test)}:
            raise _NotAttention(f"the probabilities {p.name!r} are read outside their NaN guard {guard.name}")

    def _check_softmax(self, p: Value) -> None:
        node = self.producers[id(p)]
        if node.op == "softmax":
            self._private(node.inputs[0], "logits")
            axis = node.attrs["axis"]
            if axis not in (-1, len(p.shape) - 1):
                raise _NotAttention(f"{node.name} is a softmax over axis {axis}, not over the keys (the last axis)")
            return
        exp, total = (self.producers[id(v)] for v in node.inputs)
        sub = self.producers[id(exp.inputs[0])]
        peak = self.producers[id(sub.inputs[1])]
        for r in (total, peak):
            if tuple(r.attrs.get("axes") or ()) not in ((-1,), (len(p.shape) - 1,)) or not r.attrs.get("keepdims"):
                raise _NotAttention(f"{r.name} reduces axes {r.attrs.get('axes')}, not the keys (the last axis)")
        for value, what in ((exp.outputs[0], "exponentials"), (sub.outputs[0], "shifted logits"),
                            (total.outputs[0], "sums"), (peak.outputs[0], "maxima")):
            readers = {n.name for n in self.readers.get(id(value), [])}
            if id(value) in self.outputs or len(readers) > (2 if what == "exponentials" else 1):
                raise _NotAttention(f"the softmax's {what} {value.name!r} are read outside it")
        if len(self.readers.get(id(sub.inputs[0]), [])) != 2:
            raise _NotAttention(f"the logits {sub.inputs[0].name!r} are read outside the softmax")

    def _unmask(self, logits: Value) -> tuple[Value, _Mask | None]:
        """(the scores, the mask) of the logits: no mask, one, or a causal one and one other (GPT-2 with a
        padding mask), merged."""
        masks, scores = [], logits
        while (node := self._made_by(scores, "add", "where")) is not None and len(masks) < 2:
            if masks:
                self._private(scores, "masked scores")
            scores, mask = self._one_mask(node, scores)
            masks.append(mask)
        if len(masks) == 2 and [m.causal for m in masks].count(True) != 1:
            raise _NotAttention("two masks, not one causal and one other; one mask besides a causal one is "
                                "recognised")
        if len(masks) == 2:
            causal, other = sorted(masks, key=lambda m: not m.causal)
            if np.all(np.isneginf(causal.data) | (causal.data == 0)):
                return scores, dataclasses.replace(other, causal=True)
            # a finite fill plus the other mask can overflow to -inf, or leave a row whose keys are all hidden
            # uniform: only the sum of both as one additive mask is exact
            return scores, dataclasses.replace(other, extra=causal.data)
        return scores, masks[0] if masks else None

    def _one_mask(self, node: Node, logits: Value) -> tuple[Value, _Mask]:
        """(the scores, the mask) of one add or where."""
        if node.op == "add":
            for scores, mask in (node.inputs, node.inputs[::-1]):
                if scores.shape == logits.shape and self._is_scores(scores):
                    return scores, self._additive(mask, logits)
            raise _NotAttention(f"{node.name} adds no mask to a matmul of Q and K^T")
        cond, a, b = node.inputs
        for scores, fill, hide_when in ((b, a, True), (a, b, False)):
            if scores.shape == logits.shape and self._is_scores(scores) and _is_scalar(fill):
                value = float(fill.data.reshape(()))
                if value > HIDING_FILL:
                    raise _NotAttention(f"{node.name} fills with {value:g}, which does not hide a key "
                                        f"(only -inf or the lowest float does)")
                if not _broadcasts(cond.shape, logits.shape):
                    raise _NotAttention(f"the mask {cond.name!r} {cond.shape} does not broadcast to the scores")
                if cond.is_constant:
                    hidden = cond.data.astype(bool) == hide_when
                    data = np.where(hidden, value, 0.0).astype(logits.dtype)
                    return scores, _Mask(data=data, causal=_is_causal(hidden, logits.shape))
                return scores, _Mask(cond=cond, fill=value, hide_when=hide_when)
        raise _NotAttention(f"{node.name} does not choose between the scores and a constant fill")

    def _additive(self, mask: Value, logits: Value) -> _Mask:
        if not _broadcasts(mask.shape, logits.shape):
            raise _NotAttention(f"the mask {mask.name!r} {mask.shape} does not broadcast to the scores "
                                f"{logits.shape} as [B or 1, H or 1, Lq or 1, Lk]")
        if mask.is_constant and _is_causal(mask.data <= HIDING_FILL, logits.shape) and not np.any(
                (mask.data > HIDING_FILL) & (mask.data != 0)):
            return _Mask(data=mask.data, causal=True)
        return _Mask(value=mask)

    def _is_scores(self, v: Value) -> bool:
        """Whether `v` is a (scaled) matmul, or a mask of one: the scores side of a mask."""
        while (scaled := _scalar_scale(self._made_by(v, "mul", "div"))) is not None:
            v = scaled[1]
        inner = self._made_by(v, "add", "where")
        if inner is not None:
            return any(self._is_scores(x) for x in inner.inputs if x.shape == v.shape)
        return self._made_by(v, "matmul") is not None

    def _unscale(self, v: Value) -> tuple[Value, float]:
        """`v` without its scalar constant factors (and reshapes of its batch axes), and their product."""
        factor = 1.0
        while True:
            scaled = _scalar_scale(self._made_by(v, "mul", "div"))
            reshape = self._made_by(v, "reshape")
            if scaled is not None:
                factor *= scaled[0]
                v = scaled[1]
            elif reshape is not None and _same_matrices(reshape.inputs[0].shape, v.shape):
                v = reshape.inputs[0]
            else:
                return v, factor

    def _keys(self, kt: Value) -> tuple[_Keys, float]:
        """K from K^T: the source of a transpose of the last two axes, else a transpose to make."""
        kt, factor = self._unscale(kt)
        rank = len(kt.shape)
        node = self._made_by(kt, "transpose")
        if node is None:
            return _Keys(kt, (*range(rank - 2), rank - 1, rank - 2)), factor
        source = node.inputs[0]
        perm = tuple(node.attrs["perm"] or reversed(range(len(source.shape))))
        perm = (*perm[:-2], perm[-1], perm[-2])
        return (_Keys(source) if perm == tuple(range(len(perm))) else _Keys(source, perm)), factor

    def _check_types(self, node: Node, found: _Attention) -> None:
        keys = found.keys.source.shape if found.keys.perm is None else tuple(
            found.keys.source.shape[p] for p in found.keys.perm)
        shapes = [found.q.shape, keys, found.v.shape] if found.view is None else [found.view] * 3
        types = [TensorType(shape, x.dtype) for shape, x in zip(shapes, (found.q, found.keys.source, found.v))]
        if found.mask is not None and found.mask.value is not None:
            types.append(found.mask.value.type)
        try:
            (out,) = infer_types("attention", types, found.attrs(), node.name)
        except ShapeError as e:
            raise _NotAttention(str(e)) from None
        want = (node if found.merge is None else found.merge).outputs[0].type
        if out != want:
            raise _NotAttention(f"the attention would give {out}, not the {want} it replaces")


def _is_scalar(v: Value) -> bool:
    return v.is_constant and v.data.size == 1 and np.issubdtype(v.data.dtype, np.floating)


def _scalar_scale(node: Node | None) -> tuple[float, Value] | None:
    """(factor, operand) of a multiply or divide by a scalar constant."""
    if node is None:
        return None
    a, b = node.inputs
    if _is_scalar(b) and _same_shape_after(a, node):
        value = float(b.data.reshape(()))
        return (value if node.op == "mul" else 1.0 / value), a
    if node.op == "mul" and _is_scalar(a) and _same_shape_after(b, node):
        return float(a.data.reshape(())), b
    return None


def _swaps_heads(node: Node) -> bool:
    """Whether `node` is a transpose of the middle two of four axes: a head split or merge."""
    return node.op == "transpose" and len(node.inputs[0].shape) == 4 and tuple(node.attrs["perm"] or ()) == (
        0, 2, 1, 3)


def _last_axis_part(node: Node) -> tuple[int, int] | None:
    """(start, stop) of a slice that cuts its input's last axis alone, with step 1; else None."""
    shape = node.inputs[0].shape
    starts, ends, axes, steps = (node.attrs[k] for k in ("starts", "ends", "axes", "steps"))
    axes = range(len(starts)) if axes is None else [a % len(shape) for a in axes]
    steps = steps if steps is not None else (1,) * len(starts)
    kept = {a: range(shape[a])[slice(int(b), int(e), int(k))] for a, b, e, k in zip(axes, starts, ends, steps)}
    cut = {a: r for a, r in kept.items() if r != range(shape[a])}
    last = len(shape) - 1
    if set(cut) - {last}:
        return None
    part = cut.get(last, range(shape[last]))
    return (part.start, part.stop) if part.step == 1 and len(part) else None


def _same_shape_after(v: Value, node: Node) -> bool:
    return v.type == node.outputs[0].type


def _same_matrices(a: tuple, b: tuple) -> bool:
    """Whether a reshape between shapes `a` and `b` keeps the matrices and only adds or drops batch axes of 1."""
    def strip(s):
        s = list(s)
        while s and s[0] == 1:
            s.pop(0)
        return tuple(s)
    return len(a) >= 2 and len(b) >= 2 and a[-2:] == b[-2:] and strip(a[:-2]) == strip(b[:-2])


def _broadcasts(shape: tuple, target: tuple) -> bool:
    """Whether `shape` broadcasts to `target` without growing it, its last axis whole (the keys)."""
    if len(shape) > len(target) or (shape and shape[-1] != target[-1]):
        return False
    return all(n in (1, t) for n, t in zip(shape[::-1], target[::-1]))


def _is_causal(hidden: np.ndarray, scores: tuple) -> bool:
    """Whether `hidden` (True: key hidden) is the causal pattern over (Lq, Lk), broadcast over the batch, and
    leaves every query a key (Lk >= Lq), so that hiding by -inf or by the lowest float is the same."""
    lq, lk = scores[-2:]
    if lk < lq or hidden.shape[-2:] != (lq, lk) or any(n != 1 for n in hidden.shape[:-2]):
        return False
    causal = np.arange(lk)[None, :] > np.arange(lq)[:, None] + (lk - lq)
    return bool(np.array_equal(hidden.reshape(lq, lk), causal))


def _build(ed: GraphEditor, node: Node, found: _Attention, choice: FormChoice) -> Value:
    keys = ed.get(found.keys.source)
    if found.keys.perm is not None:
        keys = ed.op("transpose", keys, perm=found.keys.perm, name=f"{node.name}_keys")
    inputs = [ed.get(found.q), keys, ed.get(found.v)]
    if found.view is not None:  # the fused projection, a view of it passed as Q, K and V
        inputs = [ed.op("reshape", inputs[0], shape=found.view, name=f"{node.name}_qkv")] * 3
    mask = found.mask
    if mask is not None and (additive := _additive_mask(ed, node, mask, found.q.dtype)) is not None:
        inputs.append(additive)
    return ed.op("attention", *inputs, name=node.name, **found.attrs(), form=choice.form,
                 key_block=choice.key_block)


def _additive_mask(ed: GraphEditor, node: Node, mask: _Mask, dtype: str) -> Value | None:
    """The attention's mask input, built in the new graph (None: causal alone)."""
    if mask.value is not None:
        out = ed.get(mask.value)
    elif mask.cond is not None:
        hide = ed.const(np.array(mask.fill, dtype=dtype), f"{node.name}_fill")
        keep = ed.const(np.array(0.0, dtype=dtype), f"{node.name}_keep")
        pair = (hide, keep) if mask.hide_when else (keep, hide)
        out = ed.op("where", ed.get(mask.cond), *pair, name=f"{node.name}_mask")
    elif mask.data is not None and not mask.causal:
        out = ed.const(mask.data, f"{node.name}_mask")
    else:
        return None
    if mask.extra is not None:
        out = ed.op("add", out, ed.const(mask.extra, f"{node.name}_causal"), name=f"{node.name}_masks")
    return out
