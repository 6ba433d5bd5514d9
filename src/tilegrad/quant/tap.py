"""Running an ONNX model with some of its intermediate tensors as extra outputs, in tilegrad's interpreter (each
op's NumPy reference, the oracle compiled modules are checked against): how calibration, bias correction and the
report see inside the float and the quantized models, without compiling each variant."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import onnx

from ..errors import TilegradError
from ..frontend.onnx import import_onnx
from ..ir.graph import Graph
from ..ir.interpret import run_reference


def graph_inputs(model: onnx.ModelProto) -> list[str]:
    """The inputs a caller feeds (graph inputs that are not initializers)."""
    initialized = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initialized]


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
