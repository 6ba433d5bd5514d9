"""Running an ONNX model with some of its intermediate tensors as extra outputs, in tilegrad's interpreter (each
op's NumPy reference, the oracle compiled modules are checked against): how calibration, bias correction and the
report see inside the float and the quantized models, without compiling each variant."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import numpy as np
import onnx

from ..errors import TilegradError
from ..frontend.onnx import import_onnx
from ..ir.graph import Graph, Node
from ..ir.interpret import run_reference
from ..ir.registry import lookup


def graph_inputs(model: onnx.ModelProto) -> list[str]:
    """The inputs a caller feeds (graph inputs that are not initializers)."""
    initialized = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initialized]


def declared_inputs(model: onnx.ModelProto) -> dict[str, tuple[str, tuple]]:
    """{name: (element type, declared dimensions)} of the inputs a caller feeds, dimensions as ints or, where
    symbolic, names ("?" unnamed)."""
    from ..frontend.onnx_inputs import declared_dim
    from ..frontend.onnx_tensors import onnx_dtype

    fed = set(graph_inputs(model))
    out = {}
    for i in model.graph.input:
        if i.name in fed:
            tt = i.type.tensor_type
            out[i.name] = (onnx_dtype(tt.elem_type, f"input {i.name!r}"), tuple(declared_dim(d) for d in tt.shape.dim))
    return out


def tapped(model: onnx.ModelProto, names: Sequence[str]) -> onnx.ModelProto:
    """A copy of `model` whose outputs are the tensors `names` (float32 intermediates or outputs)."""
    produced = {o for n in model.graph.node for o in n.output} | set(graph_inputs(model))
    unknown = [n for n in names if n not in produced]
    if unknown:
        raise TilegradError(f"cannot observe tensor(s) {unknown}: no node or input of the model produces them")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.output[:]
    out.graph.output.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in names)
    return out


class Observer:
    """`model` imported (once per input shape) with the tensors `names` as its outputs."""

    def __init__(self, model: onnx.ModelProto, names: Sequence[str]):
        self.names = list(names)
        self._model = tapped(model, self.names)
        self._graphs: dict[tuple, Graph] = {}

    def run(self, batches: Sequence[dict[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
        """For each batch, the observed tensors by name."""
        for batch in batches:
            key = tuple((n, a.shape) for n, a in batch.items())
            if key not in self._graphs:
                self._graphs[key] = import_onnx(self._model, input_shapes={n: a.shape for n, a in batch.items()})
            g = self._graphs[key]
            outputs = run_reference(g, [batch[v.name] for v in g.inputs])
            yield dict(zip(self.names, outputs))


class IncrementalObserver:
    """One tensor of each model in a sequence of models that differ little, such as bias correction's rewrites
    (one layer's bias changed per step). A node whose op, attributes, constants and inputs are those of a node
    evaluated for the previous model is not evaluated again, so the whole sequence costs about one run of the
    model instead of one run per model: for ResNet-50's 53 layers, minutes instead of most of an hour."""

    def __init__(self, batches: Sequence[dict[str, np.ndarray]]):
        self._batches = list(batches)
        self._values: dict[tuple[int, bytes], np.ndarray] = {}  # (batch index, signature) -> the value

    def run(self, model: onnx.ModelProto, name: str) -> list[np.ndarray]:
        """The tensor `name` of `model` for each batch; what the previous model's run computed is reused and the
        rest forgotten, so memory holds one model's worth of values."""
        graphs: dict[tuple, Graph] = {}
        kept: dict[tuple[int, bytes], np.ndarray] = {}
        out = []
        for i, batch in enumerate(self._batches):
            key = tuple((n, a.shape) for n, a in batch.items())
            if key not in graphs:
                graphs[key] = import_onnx(tapped(model, [name]), input_shapes={n: a.shape for n, a in batch.items()})
            out.append(self._evaluate(graphs[key], i, batch, kept))
        self._values = kept
        return out

    def _evaluate(self, g: Graph, batch_index: int, batch: dict[str, np.ndarray],
                  kept: dict[tuple[int, bytes], np.ndarray]) -> np.ndarray:
        signature = _signatures(g)
        producers = g.producers()
        env: dict[int, np.ndarray] = {id(v): np.asarray(batch[v.name]) for v in g.inputs}
        needed = _ancestors(g.outputs[0], producers)
        for n in g.nodes:
            if id(n) not in needed:
                continue
            keys = [(batch_index, signature[id(v)]) for v in n.outputs]
            if all(k in self._values or k in kept for k in keys):
                values = [kept.get(k, self._values.get(k)) for k in keys]
            else:
                args = (v.data if v.is_constant else env[id(v)] for v in n.inputs)
                with np.errstate(all="ignore"):
                    result = lookup(n.op).reference(*args, **n.attrs)
                values = [np.asarray(a).astype(v.dtype, copy=False)
                          for v, a in zip(n.outputs, result if isinstance(result, tuple) else (result,))]
            for v, k, a in zip(n.outputs, keys, values):
                env[id(v)] = kept[k] = a
        v = g.outputs[0]
        return v.data if v.is_constant else env[id(v)]


def _ancestors(value, producers: dict[int, Node]) -> set[int]:
    """id() of every node that `value` depends on."""
    out: set[int] = set()
    stack = [value]
    while stack:
        node = producers.get(id(stack.pop()))
        if node is not None and id(node) not in out:
            out.add(id(node))
            stack.extend(node.inputs)
    return out


def _signatures(g: Graph) -> dict[int, bytes]:
    """id(value) -> a digest of how it is computed: the input's name, the constant's bytes, or the producing
    node's op, attributes and its inputs' digests. Equal digests mean equal values for equal inputs."""
    out: dict[int, bytes] = {}

    def of(v) -> bytes:
        if id(v) not in out:
            h = hashlib.blake2b(digest_size=16)
            if v.is_constant:
                h.update(f"const {v.dtype} {v.shape}".encode())
                h.update(np.ascontiguousarray(v.data).tobytes())
            else:
                h.update(f"input {v.name} {v.dtype} {v.shape}".encode())
            out[id(v)] = h.digest()
        return out[id(v)]

    for v in g.inputs:
        of(v)
    for n in g.nodes:
        h = hashlib.blake2b(digest_size=16)
        h.update(f"{n.op} {sorted(n.attrs.items(), key=lambda kv: kv[0])!r}".encode())
        for v in n.inputs:
            h.update(of(v) if v.is_constant or id(v) not in out else out[id(v)])
        for i, v in enumerate(n.outputs):
            hv = h.copy()
            hv.update(f"output {i}".encode())
            out[id(v)] = hv.digest()
    return out
