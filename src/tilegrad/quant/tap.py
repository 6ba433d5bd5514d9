"""Running an ONNX model with some of its intermediate tensors as extra outputs, compiled by tilegrad: how
calibration, bias correction and the report see inside the float and the quantized models."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import onnx
from onnx import shape_inference

from ..errors import TilegradError


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
    """`model` compiled once (per input shape) with the tensors `names` as its outputs."""

    def __init__(self, model: onnx.ModelProto, names: Sequence[str]):
        from ..api import compile as compile_model

        self.names = list(names)
        self._module = compile_model(shape_inference.infer_shapes(tapped(model, self.names)))

    def run(self, batches: Sequence[dict[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
        """For each batch, the observed tensors by name."""
        for batch in batches:
            outputs = self._module(**batch)
            yield dict(zip(self.names, outputs if isinstance(outputs, list) else [outputs]))
