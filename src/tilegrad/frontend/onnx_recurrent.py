"""ONNX's recurrent layers, RNN, GRU and LSTM, unrolled over their static sequence length into registry ops.

The input projection of every time step is one matmul (`X @ W^T + biases`, shape [seq, batch, gates * hidden]);
each step then adds its row to the recurrent matmul `H @ R^T` and computes the gates. A reverse direction walks
the steps backwards; constant `sequence_lens` shorter than the sequence freeze each batch row's state after its
last step and zero its outputs there, as ONNX Runtime does (a reverse direction starts at each row's last step).
Activations follow ONNX's list (per gate, per direction) with `activation_alpha`/`activation_beta` taken in
order by the activations that have parameters. The reader (`onnx.py`) imports this module, which registers these
mappings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..errors import ResourceLimitError, ShapeError, UnsupportedFeatureError
from ..ir.graph import Value
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import constant_input, onnx_op
from .onnx_sequences import stack

MAX_STEPS = 5_000  # time steps (over all directions) a layer may unroll into, some 20 nodes each

# Activation -> (default alpha, default beta); None: it takes no such parameter. The defaults are ONNX Runtime's:
# the ops' own for LeakyRelu, HardSigmoid and Elu, 0 where it has none (Affine, ScaledTanh, ThresholdedRelu).
_PARAMETERS = {"relu": (None, None), "tanh": (None, None), "sigmoid": (None, None), "softsign": (None, None),
               "softplus": (None, None), "affine": (0.0, 0.0), "leakyrelu": (0.01, None),
               "thresholdedrelu": (0.0, None), "scaledtanh": (0.0, 0.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}


class Activation(NamedTuple):
    kind: str  # lower case ONNX name
    alpha: float | None
    beta: float | None

    def apply(self, b: B, name: str, x: Value) -> Value:
        def c(v):
            return b.const(np.array(v, x.dtype), f"{name}_param")
        if self.kind in ("relu", "tanh", "sigmoid", "softsign", "softplus"):
            return b.op(self.kind, x, name=name)
        if self.kind == "affine":
            return b.op("add", b.op("mul", x, c(self.alpha), name=f"{name}_scaled"), c(self.beta), name=name)
        if self.kind == "scaledtanh":
            inner = b.op("tanh", b.op("mul", x, c(self.beta), name=f"{name}_scaled"), name=f"{name}_tanh")
            return b.op("mul", inner, c(self.alpha), name=name)
        if self.kind == "hardsigmoid":
            return b.op("hard_sigmoid", x, name=name, alpha=self.alpha, beta=self.beta)
        op = {"leakyrelu": "leaky_relu", "thresholdedrelu": "thresholded_relu", "elu": "elu"}[self.kind]
        return b.op(op, x, name=name, alpha=self.alpha)


def _activations(name: str, names, alphas, betas, per_direction: tuple[str, ...], directions: int):
    """The activations of each direction: ONNX's list (one per gate function, for each direction in turn; one
    direction's list serves both), or the op's defaults."""
    names = list(names or per_direction * directions)
    if len(names) == len(per_direction) and directions == 2:
        names *= 2
    if len(names) != len(per_direction) * directions:
        raise ShapeError(f"node {name!r}: {len(names)} activation(s) given; it takes {len(per_direction)} per "
                         f"direction, for {directions} direction(s)")
    alphas, betas, out = list(alphas or ()), list(betas or ()), []
    for a in names:
        kind = a.lower()
        if kind not in _PARAMETERS:
            raise UnsupportedFeatureError(f"node {name!r}: activation {a!r} is not one ONNX defines for recurrent "
                                          f"layers ({', '.join(sorted(_PARAMETERS))})")
        default_alpha, default_beta = _PARAMETERS[kind]
        alpha = None if default_alpha is None else float(alphas.pop(0) if alphas else default_alpha)
        beta = None if default_beta is None else float(betas.pop(0) if betas else default_beta)
        out.append(Activation(kind, alpha, beta))
    n = len(per_direction)
    return [out[d * n:(d + 1) * n] for d in range(directions)]


class Step(NamedTuple):
    """What one time step of one direction sees: its row of the input projection, the state, the transposed
    recurrent weights, and the cell's own extra inputs."""

    x: Value       # [batch, gates * hidden], biases included
    h: Value       # [batch, hidden]
    c: Value | None
    rt: Value      # [hidden, gates * hidden]
    extra: dict


def _gate(b: B, name: str, v: Value, k: int, hidden: int) -> Value:
    return b.op("slice", v, name=name, starts=(k * hidden,), ends=((k + 1) * hidden,), axes=(len(v.shape) - 1,))


def _clipped(b: B, name: str, v: Value, clip) -> Value:
    return v if clip is None else b.op("clip", v, name=f"{name}_clip", min=-float(clip), max=float(clip))


def _rnn_cell(b: B, name, s: Step, acts, clip, hidden, **_):
    pre = b.op("add", s.x, b.op("matmul", s.h, s.rt, name=f"{name}_rec"), name=f"{name}_pre")
    return acts[0].apply(b, f"{name}_h", _clipped(b, name, pre, clip)), None


def _gru_cell(b: B, name, s: Step, acts, clip, hidden, linear_before_reset=0, **_):
    f, g = acts
    rec = b.op("matmul", s.h, s.rt if linear_before_reset else _gate(b, f"{name}_rt_zr", s.rt, 0, 2 * hidden),
               name=f"{name}_rec")

    def gate(k, label):
        pre = b.op("add", _gate(b, f"{name}_x{label}", s.x, k, hidden), _gate(b, f"{name}_r{label}", rec, k, hidden),
                   name=f"{name}_{label}_pre")
        return f.apply(b, f"{name}_{label}", _clipped(b, f"{name}_{label}", pre, clip))
    z, r = gate(0, "z"), gate(1, "r")
    if linear_before_reset:
        rec_h = _gate(b, f"{name}_rh", rec, 2, hidden)
        if "rb_h" in s.extra:
            rec_h = b.op("add", rec_h, s.extra["rb_h"], name=f"{name}_rec_h")
        reset = b.op("mul", r, rec_h, name=f"{name}_reset")
    else:
        rh = _gate(b, f"{name}_rt_h", s.rt, 2, hidden)
        reset = b.op("matmul", b.op("mul", r, s.h, name=f"{name}_reset_h"), rh, name=f"{name}_reset")
    pre = b.op("add", _gate(b, f"{name}_xh", s.x, 2, hidden), reset, name=f"{name}_h_pre")
    candidate = g.apply(b, f"{name}_candidate", _clipped(b, f"{name}_h", pre, clip))
    keep = b.op("mul", z, b.op("sub", s.h, candidate, name=f"{name}_delta"), name=f"{name}_keep")
    return b.op("add", candidate, keep, name=f"{name}_h"), None


def _lstm_cell(b: B, name, s: Step, acts, clip, hidden, input_forget=0, **_):
    f, g, h_act = acts
    pre = b.op("add", s.x, b.op("matmul", s.h, s.rt, name=f"{name}_rec"), name=f"{name}_pre")
    i_pre, o_pre, f_pre, c_pre = (_gate(b, f"{name}_{k}_pre", pre, k, hidden) for k in range(4))
    p = s.extra.get("p")
    if p is not None:
        i_pre = b.op("add", i_pre, b.op("mul", p[0], s.c, name=f"{name}_pi"), name=f"{name}_i_peep")
        f_pre = b.op("add", f_pre, b.op("mul", p[2], s.c, name=f"{name}_pf"), name=f"{name}_f_peep")
    i = f.apply(b, f"{name}_i", _clipped(b, f"{name}_i", i_pre, clip))
    if input_forget:
        forget = b.op("sub", b.const(np.array(1, i.dtype), f"{name}_one"), i, name=f"{name}_f")
    else:
        forget = f.apply(b, f"{name}_f", _clipped(b, f"{name}_f", f_pre, clip))
    cell = g.apply(b, f"{name}_g", _clipped(b, f"{name}_g", c_pre, clip))
    c = b.op("add", b.op("mul", forget, s.c, name=f"{name}_fc"), b.op("mul", i, cell, name=f"{name}_ig"),
             name=f"{name}_c")
    if p is not None:
        o_pre = b.op("add", o_pre, b.op("mul", p[1], c, name=f"{name}_po"), name=f"{name}_o_peep")
    o = f.apply(b, f"{name}_o", _clipped(b, f"{name}_o", o_pre, clip))
    return b.op("mul", o, h_act.apply(b, f"{name}_hc", c), name=f"{name}_h"), c


class _Layer(NamedTuple):
    gates: int
    activations: tuple[str, ...]
    cell: Callable


_LAYERS = {"RNN": _Layer(1, ("Tanh",), _rnn_cell), "GRU": _Layer(3, ("Sigmoid", "Tanh"), _gru_cell),
           "LSTM": _Layer(4, ("Sigmoid", "Tanh", "Tanh"), _lstm_cell)}


class _Order(NamedTuple):
    """Which time index each step reads and writes (per batch row when rows differ), and which rows a step
    still runs (None: all rows run every step)."""

    index: np.ndarray         # [seq, batch] int64
    running: np.ndarray | None  # [seq, batch] bool

    @staticmethod
    def of(seq: int, batch: int, lens, reverse: bool) -> _Order:
        lens = np.full(batch, seq) if lens is None else lens
        s = np.arange(seq)[:, None]
        running = s < lens[None, :]
        index = np.where(running, lens[None, :] - 1 - s, s) if reverse else np.broadcast_to(s, (seq, batch))
        return _Order(index.astype(np.int64), None if running.all() else running)

    @property
    def uniform(self) -> bool:
        return bool((self.index == self.index[:, :1]).all())


def _projection(b: B, name, pick, x, w, bias, p, layer: _Layer, hidden: int, attrs) -> tuple[Value, dict]:
    """Every step's input projection X @ W^T with the biases added, [seq, batch, gates * hidden], and the
    cell's extra inputs of this direction (peepholes, GRU's recurrent bias of h when linear_before_reset)."""
    gh = layer.gates * hidden
    wt = b.op("transpose", b.op("gather", w, pick, name=f"{name}_w", axis=0), name=f"{name}_wt", perm=(1, 0))
    proj = b.op("matmul", x, wt, name=f"{name}_projection")
    extra = {}
    if bias is not None:
        bd = b.op("gather", bias, pick, name=f"{name}_b", axis=0)
        wb, rb = _gate(b, f"{name}_wb", bd, 0, gh), _gate(b, f"{name}_rb", bd, 1, gh)
        if layer.gates == 3 and attrs.get("linear_before_reset"):  # GRU: Rb_h is added inside the reset
            extra["rb_h"] = _gate(b, f"{name}_rb_h", rb, 2, hidden)
            rb = b.op("concat", _gate(b, f"{name}_rb_zr", rb, 0, 2 * hidden),
                      b.const(np.zeros(hidden, rb.dtype), f"{name}_zeros"), name=f"{name}_rb_masked", axis=0)
        proj = b.op("add", proj, b.op("add", wb, rb, name=f"{name}_bias"), name=f"{name}_projection_biased")
    if p is not None:
        pd = b.op("gather", p, pick, name=f"{name}_p", axis=0)
        extra["p"] = tuple(_gate(b, f"{name}_p{k}", pd, k, hidden) for k in range(3))
    return proj, extra


def _direction(b: B, name, d, x, w, r, bias, h0, c0, p, order: _Order, layer: _Layer, acts, hidden, clip, attrs):
    """Y [seq, batch, hidden], and the final H and C of direction `d`."""
    seq, batch = order.index.shape
    pick = b.const(np.array(d, np.int64), f"{name}_direction")
    proj, extra = _projection(b, name, pick, x, w, bias, p, layer, hidden, attrs)
    rt = b.op("transpose", b.op("gather", r, pick, name=f"{name}_r", axis=0), name=f"{name}_rt", perm=(1, 0))
    zeros = b.const(np.zeros((batch, hidden), x.dtype), f"{name}_zero_state")
    h = zeros if h0 is None else b.op("gather", h0, pick, name=f"{name}_h0", axis=0)
    c = None if layer.gates != 4 else zeros if c0 is None else b.op("gather", c0, pick, name=f"{name}_c0", axis=0)
    if not order.uniform:  # each batch row walks its own steps: reorder the rows' time indices once
        index = b.const(np.broadcast_to(order.index[:, :, None], proj.shape).copy(), f"{name}_order")
        proj = b.op("gather_elements", proj, index, name=f"{name}_reordered", axis=0)
    ys = []
    for s in range(seq):
        at = s if not order.uniform else int(order.index[s, 0])
        row = b.op("gather", proj, b.const(np.array(at, np.int64), f"{name}_t"), name=f"{name}_x{s}", axis=0)
        h_new, c_new = layer.cell(b, f"{name}_t{s}", Step(row, h, c, rt, extra), acts, clip, hidden, **attrs)
        if order.running is None:
            h, c, y = h_new, c_new, h_new
        else:
            running = b.const(order.running[s][:, None].copy(), f"{name}_running")
            h = b.op("where", running, h_new, h, name=f"{name}_h{s}")
            c = None if c is None else b.op("where", running, c_new, c, name=f"{name}_c{s}")
            y = b.op("where", running, h_new, b.const(np.array(0, x.dtype), f"{name}_zero"), name=f"{name}_y{s}")
        ys.append(y)
    if order.uniform:
        by_time = [ys[int(s)] for s in np.argsort(order.index[:, 0])]
        return stack(b, f"{name}_y", by_time), h, c
    index = b.const(np.broadcast_to(order.index[:, :, None], (seq, batch, hidden)).copy(), f"{name}_y_order")
    return b.op("gather_elements", stack(b, f"{name}_y_steps", ys), index, name=f"{name}_y", axis=0), h, c


def _recurrent(op_type: str):
    layer = _LAYERS[op_type]

    def convert(b: B, name, x, w, r, bias=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, *,
                activation_alpha=None, activation_beta=None, activations=None, clip=None, direction="forward",
                hidden_size=None, layout=0, **cell_attrs):
        outputs = b.node_outputs
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ShapeError(f"node {name!r}: direction {direction!r} is not forward, reverse or bidirectional")
        dirs = 2 if direction == "bidirectional" else 1
        acts = _activations(name, activations, activation_alpha, activation_beta, layer.activations, dirs)
        if layout:  # [batch, seq, ...] and [batch, directions, ...] to the layout the steps read
            x, initial_h, initial_c = (None if v is None else
                                       b.op("transpose", v, name=f"{name}_layout", perm=(1, 0, 2))
                                       for v in (x, initial_h, initial_c))
        hidden = _check_shapes(name, x, w, r, dirs, layer.gates, hidden_size)
        seq, batch = x.shape[0], x.shape[1]
        if seq * dirs > MAX_STEPS:
            raise ResourceLimitError(f"{op_type} (node {name!r}) unrolls {seq} time step(s) in {dirs} direction(s), "
                                     f"more than the limit of {MAX_STEPS} steps")
        lens = _lengths(sequence_lens, seq, batch, name)
        ys, hs, cs = [], [], []
        for d in range(dirs):
            order = _Order.of(seq, batch, lens, direction == "reverse" or d == 1)
            y, h, c = _direction(b, f"{name}_d{d}", d, x, w, r, bias, initial_h, initial_c, p, order, layer, acts[d],
                                 hidden, clip, cell_attrs)
            ys.append(y)
            hs.append(h)
            cs.append(c)
        y, y_h = stack(b, f"{name}_Y", ys, 1), stack(b, f"{name}_Y_h", hs)
        y_c = stack(b, f"{name}_Y_c", cs) if layer.gates == 4 else None
        if layout:
            y = b.op("transpose", y, name=f"{name}_Y_layout", perm=(2, 0, 1, 3))
            y_h, y_c = (None if v is None else b.op("transpose", v, name=f"{name}_layout_out", perm=(1, 0, 2))
                        for v in (y_h, y_c))
        outs = (y, y_h, y_c)[:outputs]
        return outs[0] if len(outs) == 1 else outs
    return convert


def _check_shapes(name, x, w, r, dirs: int, gates: int, hidden_size) -> int:
    """The hidden size, after checking X, W and R against each other."""
    hidden = int(hidden_size) if hidden_size is not None else r.shape[-1]
    want = {"X": (len(x.shape) == 3, "rank 3"), "W": (w.shape == (dirs, gates * hidden, x.shape[-1]),
                                                      f"shape {[dirs, gates * hidden, x.shape[-1]]}"),
            "R": (r.shape == (dirs, gates * hidden, hidden), f"shape {[dirs, gates * hidden, hidden]}")}
    for what, (ok, expected) in want.items():
        if not ok:
            raise ShapeError(f"node {name!r}: {what} must have {expected} (X {list(x.shape)}, W {list(w.shape)}, "
                             f"R {list(r.shape)})")
    return hidden


def _lengths(sequence_lens, seq: int, batch: int, name: str):
    lens = constant_input(sequence_lens, "sequence_lens", name)
    if lens is None:
        return None
    lens = np.ravel(lens).astype(np.int64)
    if lens.shape != (batch,) or lens.min() < 1 or lens.max() > seq:
        raise ShapeError(f"node {name!r}: sequence_lens {lens.tolist()} must hold {batch} length(s) in [1, {seq}]")
    return lens


for _op_type in _LAYERS:
    onnx_op(_op_type)(_recurrent(_op_type))
