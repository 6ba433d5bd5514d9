"""`fused`: a group of nodes run as one kernel. The fusion pass makes them; its `body` attribute is the group as
a graph whose inputs are the fused node's inputs. Its type rule, NumPy reference and compute all come from the
body, so a fused graph is checked against the unfused one with the same oracle, and the kernel is the members'
computes composed into one tensor expression (producers inlined or computed at the root's tiles by the default
schedule)."""

from __future__ import annotations

from ...errors import ShapeError
from ..registry import OPAQUE, Sample, TensorType, declare, lookup


def _check_inputs(types, body) -> None:
    want = [v.type for v in body.inputs]
    if list(types) != want:
        raise ShapeError(f"the fused body takes {', '.join(map(str, want))}, got {', '.join(map(str, types))}")


def _fused_type(*types: TensorType, body) -> list[TensorType]:
    _check_inputs(types, body)
    return [v.type for v in body.outputs]


def _fused_ref(*arrays, body):
    from ..interpret import run_reference

    outs = run_reference(body, arrays)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _fused_te(*tensors, body):
    """The members' computes applied in order, each reading the tensors of its producers."""
    env = {id(v): t for v, t in zip(body.inputs, tensors)}
    for n in body.nodes:
        out = lookup(n.op).compute(*(env[id(v)] for v in n.inputs), **n.attrs)
        outs = out if isinstance(out, (list, tuple)) else [out]
        for v, t in zip(n.outputs, outs):
            env[id(v)] = t
    results = [env[id(v)] for v in body.outputs]
    return results[0] if len(results) == 1 else results


def _sample_body():
    """relu(x + bias) over (6, 20), built from Values and Nodes directly (the registry is still filling)."""
    from ..graph import Graph, Node, Value

    x, bias = Value("x", TensorType((6, 20), "float32")), Value("bias", TensorType((20,), "float32"))
    total = Value("total", TensorType((6, 20), "float32"))
    out = Value("out", TensorType((6, 20), "float32"))
    return Graph((x, bias), (out,), (Node("add", "add", (x, bias), (total,), {}),
                                     Node("relu", "relu", (total,), (out,), {})))


declare("fused", kind=OPAQUE, num_inputs=(0, -1), attrs={"body": None}, infer=_fused_type, reference=_fused_ref,
        compute=_fused_te, samples=(Sample((((6, 20), "float32"), ((20,), "float32")), {"body": _sample_body()}),))
