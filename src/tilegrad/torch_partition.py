"""A torch model compiled in parts: the ops tilegrad lowers run as native modules, the others in PyTorch.

torch.export captures the whole model; where some of its ATen ops have no mapping (or a use tilegrad does not
compile), the importer names those nodes (`UnsupportedOpsError`). The captured graph is then cut by torch.fx's
capability partitioner into maximal groups of lowerable nodes, each compiled by `tilegrad.compile` as a module of
its own (the weights it reads held as constants, so folding and packing apply to them), with the other nodes
between them run by PyTorch as they were captured. As with Inductor's fallback kernels or ONNX Runtime's
execution providers, an op tilegrad does not lower costs its own time and the fusion across it, not the
compilation of the model. One `EagerOpsWarning` lists the ops left to PyTorch and the share of nodes compiled.
"""

from __future__ import annotations

import copy
import operator
import warnings
from collections.abc import Callable

import numpy as np
import torch

from .errors import ShapeError, TilegradError, UnsupportedOpError, UnsupportedOpsError
from .runtime.module import bind_arguments


class EagerOpsWarning(UserWarning):
    """Some ops of a compiled torch model run in PyTorch; the message lists them and the share compiled."""


class PartitionedModule:
    """A torch model whose lowerable parts are native modules (`segments`) and whose other ops run in PyTorch;
    called like a `Module`: NumPy arrays in (positional or by input name), NumPy arrays out. It cannot be saved:
    its PyTorch parts need the model's Python code."""

    def __init__(self, graph: torch.fx.GraphModule, placeholders: list[tuple[str, torch.Tensor | None]],
                 outputs: list[str], segments: list, compiled_nodes: int, total_nodes: int, eager_ops: list[str]):
        self._graph, self._placeholders = graph, placeholders
        self.input_names = [name for name, constant in placeholders if constant is None]
        self.output_names = outputs
        self.segments, self.compiled_nodes, self.total_nodes, self.eager_ops = (segments, compiled_nodes,
                                                                                total_nodes, eager_ops)

    @property
    def compiled_share(self) -> float:
        """Nodes of the captured graph that run natively, over all its op nodes."""
        return self.compiled_nodes / max(self.total_nodes, 1)

    def __call__(self, *args, **kwargs):
        given = bind_arguments(self.input_names, args, kwargs)
        flat = [constant if constant is not None else _tensor(given[name])
                for name, constant in self._placeholders]
        with torch.no_grad():
            outs = self._graph(*flat)
        arrays = [o.detach().contiguous().numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in outs]
        return arrays[0] if len(arrays) == 1 else arrays

    def save(self, directory):
        raise TilegradError(f"this module runs {', '.join(self.eager_ops)} in PyTorch and cannot be saved as a "
                            "native library; save needs every op compiled")


def partition(error: UnsupportedOpsError, compile_segment: Callable) -> PartitionedModule:
    """The program of `error` cut around its unsupported nodes, each lowerable group compiled by
    `compile_segment(module, example_inputs)`; a group that fails to compile runs in PyTorch too."""
    from torch.export.graph_signature import InputKind
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

    program = error.program
    graph = copy.deepcopy(program.graph_module)
    constants: dict[str, torch.Tensor] = {}
    placeholders: list[tuple[str, torch.Tensor | None]] = []
    nodes = [n for n in graph.graph.nodes if n.op == "placeholder"]
    for spec, node in zip(program.graph_signature.input_specs, nodes):
        if spec.kind == InputKind.USER_INPUT:
            placeholders.append((spec.arg.name, None))
        else:
            tensor = program.state_dict.get(spec.target)
            constants[node.name] = (program.constants[spec.target] if tensor is None else tensor).detach()
            placeholders.append((node.name, constants[node.name]))
    eager = _eager_nodes(graph.graph, error.nodes)
    total = sum(n.op == "call_function" for n in graph.graph.nodes)
    fused = CapabilityBasedPartitioner(graph, _Lowerable(eager), allows_single_node_partition=True
                                       ).partition_and_fuse()
    segments, compiled = [], 0
    for call in [n for n in fused.graph.nodes if n.op == "call_module"]:
        sub = getattr(fused, call.target)
        fixed = {i: constants[a.name] for i, a in enumerate(call.args)
                 if isinstance(a, torch.fx.Node) and a.name in constants}
        example = tuple(_example(a) for i, a in enumerate(call.args) if i not in fixed)
        try:
            native = compile_segment(FrozenWeights(sub, fixed, len(call.args)), example)
        except (UnsupportedOpError, ShapeError):  # this group runs in PyTorch as captured
            continue
        setattr(fused, call.target, _Native(native, fixed, _returns_tuple(sub)))
        segments.append(native)
        compiled += sum(n.op == "call_function" for n in sub.graph.nodes)
    count = len(program.graph_signature.output_specs)
    outputs = ["output"] if count == 1 else [f"output_{i}" for i in range(count)]  # as a Module names them
    module = PartitionedModule(fused, placeholders, outputs, segments, compiled, total, sorted(error.ops))
    warnings.warn(f"tilegrad runs these ops in PyTorch: {error.summary}; {compiled} of {total} "
                  f"nodes compiled ({100 * module.compiled_share:.0f}%) in {len(segments)} native segment(s)",
                  EagerOpsWarning, stacklevel=3)
    return module


def _eager_nodes(graph: torch.fx.Graph, unsupported: frozenset[str]) -> set[str]:
    """The unsupported nodes, with the op and every item of a tuple result where one of them is: a tuple does
    not cross between PyTorch and a native segment."""
    items = [n for n in graph.nodes if n.op == "call_function" and n.target is operator.getitem]
    eager = set(unsupported) | {n.args[0].name for n in items if n.name in unsupported}
    return eager | {n.name for n in items if n.args[0].name in eager}


class _Lowerable:
    """torch.fx's operator support: every op node but the eager ones."""

    def __init__(self, eager: set[str]):
        self.eager = eager

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and node.name not in self.eager


class FrozenWeights(torch.nn.Module):
    """A graph (dynamo's, or a group of lowerable nodes) with its weights held as buffers, so that export sees
    them as constants; it takes the other inputs only. `sizes` are the inputs dynamo passes as numbers beside the
    tensors of a graph with dynamic shapes (slot: (the tensor input, its axis) whose size it is): read from
    those tensors' shapes, so that export sees them as the same symbols. `scalars` are the Python floats of the
    model (a norm's eps, a dropout's p) that dynamo passes as tensors in such a graph (slot: value): constants
    made in the graph, so that export reads their values rather than a symbol."""

    def __init__(self, gm: torch.fx.GraphModule, weights: dict[int, torch.Tensor], arity: int,
                 sizes: dict[int, tuple[int, int]] | None = None, scalars: dict[int, float] | None = None):
        super().__init__()
        self.gm, self.arity, self.sizes, self.scalars = gm, arity, dict(sizes or {}), dict(scalars or {})
        self.slots = sorted(weights)
        for i in self.slots:
            self.register_buffer(f"weight_{i}", weights[i].detach())

    def forward(self, *inputs):
        given = iter(inputs)
        weights = {i: getattr(self, f"weight_{i}") for i in self.slots}
        fixed = {**{slot: inputs[tensor].shape[axis] for slot, (tensor, axis) in self.sizes.items()},
                 **{slot: torch.tensor(value, dtype=torch.float64) for slot, value in self.scalars.items()}}
        args = [weights[i] if i in weights else fixed[i] if i in fixed else next(given) for i in range(self.arity)]
        # Run node by node with each node's metadata current, so that the exported nodes keep the user's source
        # lines and submodules (for error messages) rather than the generated code's.
        with torch.fx.traceback.preserve_node_meta():
            return torch.fx.Interpreter(self.gm).run(*args)


class _Native(torch.nn.Module):
    """A compiled group in the cut graph: tensors in (the weights it holds skipped), tensors out."""

    def __init__(self, module, fixed: dict[int, torch.Tensor], returns_tuple: bool):
        super().__init__()
        self.module, self.fixed, self.returns_tuple = module, set(fixed), returns_tuple

    def forward(self, *args):
        outs = self.module(*(as_array(a) for i, a in enumerate(args) if i not in self.fixed))
        outs = [torch.from_numpy(o) for o in (outs if isinstance(outs, list) else [outs])]
        return tuple(outs) if self.returns_tuple else outs[0]


def _returns_tuple(graph: torch.fx.GraphModule) -> bool:
    out = next(n for n in graph.graph.nodes if n.op == "output")
    return isinstance(out.args[0], (tuple, list))


def _example(arg) -> torch.Tensor:
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        raise ShapeError(f"input {arg} of a compiled group is not a tensor")
    return torch.zeros(tuple(int(d) for d in val.shape), dtype=val.dtype)


def _tensor(a) -> torch.Tensor:
    return a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))


def as_array(t: torch.Tensor) -> np.ndarray:
    """A tensor as a C-contiguous NumPy array on the host (a view where it is one already)."""
    t = t.detach().cpu()
    return (t if t.is_contiguous() else t.contiguous()).numpy()
