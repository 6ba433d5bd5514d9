"""Constant nodes of ops tilegrad does not compile, evaluated during import by ONNX's reference implementation.

An exporter leaves small constant subgraphs in a model (a `Mod` of two shape numbers, a `Reshape` with
`allowzero` of a constant): whatever their op, their result is a constant, so they are folded before anything is
refused. Ops that draw random numbers are never folded: their result differs on every run.
"""

from __future__ import annotations

import numpy as np

from .. import config
from .onnx_file import ModelFormatError
from .onnx_tensors import check_constant

RANDOM = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
                    "Multinomial"})


def can_fold(node, inputs) -> bool:
    """True when every input of `node` is a constant tensor (at least one; a sequence is not), its op is a
    deterministic ONNX op, and the inputs are small enough to compute on during import."""
    present = [v for v in inputs if v is not None]
    return (bool(present) and all(getattr(v, "is_constant", False) for v in present)
            and node.domain in ("", "ai.onnx") and node.op_type not in RANDOM
            and sum(v.data.nbytes for v in present) <= config.get().constant_bytes)


def evaluate(node, inputs, opset: int, where: str) -> list[np.ndarray]:
    """The outputs of `node` on the constant `inputs` (Values or None for absent optional inputs), computed by
    `onnx.reference` at the model's opset."""
    from onnx import NodeProto, helper
    from onnx.reference import ReferenceEvaluator

    if node.domain:  # "ai.onnx", the default domain by its other name
        node = NodeProto.FromString(node.SerializeToString())
        node.domain = ""
    names = list(dict.fromkeys(x for x in node.input if x))
    graph = helper.make_graph([node], "fold", [helper.make_empty_tensor_value_info(x) for x in names],
                              [helper.make_empty_tensor_value_info(y) for y in node.output if y])
    feeds = {x: v.data for x, v in zip(node.input, inputs) if x}
    try:
        with np.errstate(all="ignore"):
            outs = ReferenceEvaluator(graph, opsets={"": opset}).run(None, feeds)
    except MemoryError:
        raise ModelFormatError(f"{where}: evaluating it on its constant inputs needs more memory than there "
                               f"is") from None
    except Exception as exc:  # noqa: BLE001  (any failure of the reference is this node's problem, said in one line)
        raise ModelFormatError(f"{where}: its inputs are constants, but ONNX's reference implementation cannot "
                               f"evaluate it: {type(exc).__name__}: {exc}") from None
    arrays = [np.asarray(o) for o in outs]
    for a in arrays:
        check_constant(a.shape, a.dtype, where)
    return arrays
