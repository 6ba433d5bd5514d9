"""A PyTorch module captured with torch.fx for the planner and the sharded executor: the planning graph (one
operator per traced call, shapes from an example input) and, per operator, the function that computes it on
each device's blocks (the traced call itself: an operator's blocks are whole along every dimension its math
needs whole, so the same call computes the local result).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

from ..errors import UnsupportedOpError
from . import ops
from .train_graph import TrainGraph, TrainGraphBuilder

ELEMENTWISE = {operator.add, operator.sub, operator.mul, operator.truediv, torch.add, torch.sub, torch.mul,
               torch.relu, torch.tanh, torch.sigmoid, F.relu, F.gelu, F.silu, torch.exp}
ELEMENTWISE_METHODS = {"relu", "tanh", "sigmoid", "exp"}
ELEMENTWISE_MODULES = (torch.nn.ReLU, torch.nn.GELU, torch.nn.Tanh, torch.nn.Sigmoid, torch.nn.SiLU)
MATMUL = {operator.matmul, torch.matmul, torch.bmm}
SOFTMAX = {torch.softmax, F.softmax}
SUM = {torch.sum}


@dataclass(frozen=True)
class Captured:
    graph: TrainGraph
    kernels: dict[str, Callable[..., torch.Tensor]]
    inputs: tuple[str, ...]
    output: str


def capture(module: torch.nn.Module, *example_inputs: torch.Tensor) -> Captured:
    gm = torch.fx.symbolic_trace(module)
    ShapeProp(gm).propagate(*example_inputs)
    b = TrainGraphBuilder()
    kernels: dict[str, Callable] = {}
    value: dict[torch.fx.Node, str] = {}
    inputs, output, unsupported = [], None, []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            value[node] = b.input(node.name, tuple(node.meta["tensor_meta"].shape))
            inputs.append(node.name)
        elif node.op == "get_attr":
            value[node] = b.parameter(node.target, tuple(gm.get_parameter(node.target).shape))
        elif node.op == "output":
            output = value[node.args[0]]
        elif node.op == "call_module":
            value[node] = _module_call(b, kernels, gm, node, value, unsupported)
        else:
            value[node] = _function_call(b, kernels, node, value, unsupported)
    if unsupported:
        raise UnsupportedOpError(f"parallel capture: {len(unsupported)} calls not supported: "
                                 + ", ".join(unsupported))
    return Captured(b.build(), kernels, tuple(inputs), output)


def _module_call(b, kernels, gm, node, value, unsupported) -> str | None:
    m = gm.get_submodule(node.target)
    x = value[node.args[0]]
    if x is None:  # its input is already reported unsupported
        return None
    if isinstance(m, torch.nn.Linear):
        w = b.parameter(f"{node.target}.weight", tuple(m.weight.shape))
        y = b.add(ops.linear, node.name, x, w)
        kernels[y] = F.linear
        if m.bias is None:
            return y
        y = b.add(ops.elementwise, f"{node.name}.bias_add", y, b.parameter(f"{node.target}.bias", tuple(m.bias.shape)))
        kernels[y] = torch.add
        return y
    if isinstance(m, torch.nn.LayerNorm) and m.elementwise_affine and m.bias is not None:
        y = b.add(ops.layer_norm, node.name, x, b.parameter(f"{node.target}.weight", tuple(m.weight.shape)),
                  b.parameter(f"{node.target}.bias", tuple(m.bias.shape)))
        kernels[y] = lambda t, w, bias, eps=m.eps: F.layer_norm(t, tuple(w.shape), w, bias, eps)
        return y
    if isinstance(m, ELEMENTWISE_MODULES):
        y = b.add(ops.elementwise, node.name, x)
        kernels[y] = m
        return y
    unsupported.append(f"{type(m).__name__} (node {node.name!r})")
    return None


def _function_call(b, kernels, node, value, unsupported) -> str | None:
    tensors = [a for a in node.args if isinstance(a, torch.fx.Node)]
    names = [value[a] for a in tensors]
    target = node.target
    if node.op == "call_method":
        if target in ELEMENTWISE_METHODS:
            kind = "elementwise"
        elif target == "softmax":
            kind = "softmax"
        elif target == "transpose":
            kind = "transpose"
        elif target == "sum":
            kind = "sum"
        else:
            kind = None
    else:
        kind = ("elementwise" if target in ELEMENTWISE else "matmul" if target in MATMUL
                else "softmax" if target in SOFTMAX else "transpose" if target is torch.transpose
                else "sum" if target in SUM else None)
    if kind is None or None in names:
        unsupported.append(f"{getattr(target, '__name__', target)} (node {node.name!r})")
        return None
    if kind == "elementwise":
        y = b.add(ops.elementwise, node.name, *names)
    elif kind == "matmul":
        y = b.add(ops.matmul, node.name, *names)
    elif kind == "sum":
        rank = len(b.shapes[names[0]])
        dims = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
        if dims is None or node.kwargs.get("keepdim", False):
            unsupported.append(f"sum without dim or with keepdim (node {node.name!r})")
            return None
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        y = b.add(ops.reduce_sum, node.name, names[0], axes=tuple(d % rank for d in dims))
    elif kind == "softmax":
        rank = len(b.shapes[names[0]])
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
        y = b.add(ops.softmax, node.name, names[0], axis=dim % rank)
    else:
        rank = len(b.shapes[names[0]])
        i, j = (a % rank for a in node.args[1:3])
        perm = list(range(rank))
        perm[i], perm[j] = perm[j], perm[i]
        y = b.add(ops.transpose, node.name, names[0], perm=tuple(perm))
    kernels[y] = _replay(node)
    return y


def _replay(node: torch.fx.Node) -> Callable[..., torch.Tensor]:
    """The traced call with its tensor arguments replaced by the blocks given, constants kept."""
    def call(*blocks):
        it = iter(blocks)
        args = [next(it) if isinstance(a, torch.fx.Node) else a for a in node.args]
        if node.op == "call_method":
            return getattr(args[0], node.target)(*args[1:], **node.kwargs)
        return node.target(*args, **node.kwargs)
    return call
