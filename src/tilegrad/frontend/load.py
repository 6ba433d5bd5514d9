"""Model dispatch: whatever a user hands `compile` or `tune`, as a graph before any pass.

    an ONNX model             a path, bytes or an onnx.ModelProto
    a PyTorch module          a torch.nn.Module, called on `example_inputs` (captured with torch.export)
    a PyTorch factory         "file.py:factory" or "package.module:factory" (`model_spec.py`)
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import TilegradError
from .model_spec import is_torch_spec, load_model_spec

if TYPE_CHECKING:
    from ..ir.graph import Graph


def import_model(model, example_inputs=None, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The graph of `model` (see the module doc), before any pass. `input_shapes` fixes an ONNX model's symbolic
    input dimensions, or names the inputs a factory's module is called on."""
    if isinstance(model, str) and is_torch_spec(model):
        if example_inputs is not None:
            raise TilegradError(f"{model} makes its own example inputs; give input_shapes to change their shapes")
        spec = load_model_spec(model, input_shapes)
        return _import_torch(spec.model, spec.example_inputs, None)
    torch = sys.modules.get("torch")  # a torch module means torch is imported; ONNX users never import it
    if torch is not None and isinstance(model, torch.nn.Module):
        return _import_torch(model, example_inputs, input_shapes)
    from .onnx import import_onnx

    if example_inputs is not None:
        raise TilegradError(f"example_inputs applies to a torch.nn.Module, not to {type(model).__name__}; an ONNX "
                            f"model's symbolic dimensions are fixed with input_shapes")
    return import_onnx(model, input_shapes=input_shapes)


def onnx_proto(model, example_inputs=None, *, map_external: bool = False):
    """`model` loaded as an onnx.ModelProto when it is an ONNX model (a path, bytes or a ModelProto) given without
    example inputs; None for a PyTorch module or factory (or anything given with example inputs). `map_external`:
    external data is mapped when imported rather than read in (`onnx_file.py`)."""
    torch = sys.modules.get("torch")
    if (example_inputs is not None or (isinstance(model, str) and is_torch_spec(model))
            or (torch is not None and isinstance(model, torch.nn.Module))):
        return None
    from .onnx_file import load_model

    return load_model(model, map_external=map_external)


def _import_torch(module, example_inputs, input_shapes) -> Graph:
    from .torch import import_torch

    if example_inputs is None:
        raise TilegradError("a torch.nn.Module needs example inputs: tilegrad.compile(module, (x, ...))")
    if input_shapes:
        raise TilegradError("input_shapes applies to ONNX models; a torch.nn.Module takes its input shapes "
                            "from example_inputs")
    return import_torch(module, example_inputs)
