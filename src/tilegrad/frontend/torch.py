"""PyTorch import: an nn.Module and example inputs become a typed Graph over the op registry.

The module is captured with `torch.export` and decomposed to core ATen, except for the ops the registry has whole
(those whose mapping is registered with `keep=True`: linear, matmul, layer norm, attention...). Each ATen op maps
through one small function in `torch_ops.py` or `torch_nn_ops.py`, registered in the op table (`torch_op_table.py`);
this module imports both. Parameters and buffers become constants. A node whose inputs are all constants is
evaluated by PyTorch during import, so masks, position indices and weight transposes fold. Every unsupported op is
reported at once, with the line of Python and the submodule it comes from; a shape that depends on tensor values,
or a dtype the native code has no type for, is an error that says so.
"""

from __future__ import annotations

import operator
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import ShapeError, TrainingModeError, UnsupportedFeatureError, UnsupportedOpError, UnsupportedOpsError
from ..ir.graph import Graph, Value
from ..ir.registry import TensorType
# The op families: importing them fills TORCH_OPS and KEPT (`torch_op_table.py`) with their mappings. They import
# the table and the builder, never this reader.
from . import torch_nn_ops, torch_ops  # noqa: F401  (register the mappings)
from .torch_builder import DTYPES, TorchBuilder, check_dtype, dtype_name
from .torch_op_table import KEPT, TORCH_OPS, Missing

# Ops with no effect on the values of an inference graph (export inserts them for checks).
IGNORED = ("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size", "sym_constrain_range")


def export(module: torch.nn.Module, example_inputs: Sequence) -> torch.export.ExportedProgram:
    """`module` captured by torch.export on `example_inputs` and decomposed to core ATen (less `KEPT`)."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"expected a torch.nn.Module, got {type(module).__name__}")
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    try:
        with warnings.catch_warnings():  # torch's own deprecation notices, which a user cannot act on
            warnings.simplefilter("ignore", FutureWarning)
            program = torch.export.export(module, args)
    except torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode as exc:
        raise UnsupportedFeatureError(f"the module's control flow or shapes depend on tensor values "
                                      f"({_torch_reason(exc)}); tilegrad compiles static graphs") from None
    except Exception as exc:  # noqa: BLE001  (torch.export raises many types; all mean "cannot capture")
        raise UnsupportedFeatureError(f"torch.export cannot capture the module: {_torch_reason(exc)}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return program.run_decompositions(_decompositions())


def _torch_reason(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    cause = next((line for line in lines if line.startswith("Caused by:")), None)
    head = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return head if cause is None else f"{head} {cause}"


def _decompositions():
    table = torch.export.default_decompositions()
    for name in KEPT:
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            table.pop(getattr(packet, overload), None)
    return table


def import_torch(module: torch.nn.Module, example_inputs: Sequence) -> Graph:
    """The Graph of `module` called on `example_inputs` (a tuple of tensors, or one tensor)."""
    return import_exported(export(module, example_inputs))


def import_exported(program: torch.export.ExportedProgram) -> Graph:
    """The Graph of an exported (and decomposed) program."""
    _check_static(program.graph_module.graph)
    _check_mutations(program)
    return _Importer(program).run()


class _Importer:
    def __init__(self, program: torch.export.ExportedProgram):
        self.program = program
        self.b = TorchBuilder()
        self.env: dict[str, Any] = {}  # fx node name -> Value, tuple of them, Missing or a Python value
        self.tensors: dict[int, torch.Tensor] = {}  # id(constant Value) -> its tensor (for folding)
        self.unsupported: dict[str, list[str]] = {}  # op (and why, for a use that is) -> where it is used
        self.unsupported_nodes: set[str] = set()  # the FX nodes of those uses
        self.training = False  # one of them is a training-time op: the model is in the wrong mode
        self.inputs: set[int] = set()  # id(Value) of the graph's inputs

    def run(self) -> Graph:
        graph = self.program.graph_module.graph
        self._placeholders([n for n in graph.nodes if n.op == "placeholder"])
        for node in graph.nodes:
            if node.op == "call_function":
                self._call(node)
            elif node.op == "get_attr":
                self.env[node.name] = self._constant(getattr(self.program.graph_module, node.target), node.name)
        if self.unsupported:
            items = [_uses(op, places) for op, places in self.unsupported.items()]
            if self.training:  # a model in training mode is refused, not compiled around its dropouts
                raise UnsupportedOpError(f"{len(items)} op(s) not supported: {'; '.join(items)}")
            raise UnsupportedOpsError("; ".join(items), self.program, frozenset(self.unsupported_nodes),
                                      list(self.unsupported))
        return self._build(next(n for n in graph.nodes if n.op == "output"))

    def _placeholders(self, nodes) -> None:
        from torch.export.graph_signature import ConstantArgument, InputKind

        program = self.program
        for spec, node in zip(program.graph_signature.input_specs, nodes):
            if spec.kind == InputKind.USER_INPUT:
                if isinstance(spec.arg, ConstantArgument):
                    self.env[node.name] = spec.arg.value
                else:
                    val = node.meta["val"]
                    if not isinstance(val, torch.Tensor):
                        self.env[node.name] = val
                        continue
                    check_dtype(val.dtype, f"input {spec.arg.name!r}")
                    v = self.b.input(spec.arg.name, tuple(val.shape), dtype_name(val.dtype))
                    self.inputs.add(id(v))
                    self.env[node.name] = v
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                tensor = program.state_dict.get(spec.target)
                tensor = program.constants[spec.target] if tensor is None else tensor
                self.env[node.name] = self._constant(tensor, spec.target)
            else:
                raise UnsupportedFeatureError(f"input {node.name!r} of kind {spec.kind.name} is not supported")

    def _constant(self, tensor: torch.Tensor, name: str) -> Value:
        """A constant holding a copy of `tensor` (updating the module's weights later does not change the
        compiled module's)."""
        if dtype_name(tensor.dtype) not in DTYPES:
            check_dtype(tensor.dtype, f"constant {name!r}")
        v = self.b.const(tensor.detach().contiguous().numpy().copy(), re.sub(r"\W", "_", name))
        self.tensors[id(v)] = tensor.detach()
        return v

    def _call(self, node) -> None:
        target = node.target
        args, kwargs = self._arguments(node)
        if target is operator.getitem:
            self._item(node, *args)
            return
        packet = getattr(target, "overloadpacket", None)
        if packet is not None and packet.__name__ in IGNORED:
            return
        if self._foldable(target, args, kwargs):
            self.env[node.name] = self._fold(node, args, kwargs)
            return
        fn = _handler(target)
        if fn is None:
            self._unsupported(node, _op_name(target))
            return
        self.b.val = node.meta.get("val")
        for val in torch.utils._pytree.tree_leaves(self.b.val):
            if isinstance(val, torch.Tensor):
                check_dtype(val.dtype, f"the result of {_op_name(target)} at {location(node)}")
        positional, keywords = _by_schema(target, args, kwargs)
        try:
            out = fn(self.b, node.name, *positional, **keywords)
        except UnsupportedFeatureError as exc:
            self.training |= isinstance(exc, TrainingModeError)
            self._unsupported(node, f"{_op_name(target)} ({exc})")
            return
        _check_result(node, out)
        self.env[node.name] = out

    def _unsupported(self, node, what: str) -> None:
        """Note an op that cannot be converted, and let its outputs stand in as values of the right types, so that
        the import goes on and finds every other unsupported op too."""
        self.unsupported.setdefault(what, []).append(location(node))
        self.unsupported_nodes.add(node.name)

        def stand_in(val):
            if not isinstance(val, torch.Tensor):
                return val
            return Value(node.name, TensorType(tuple(int(d) for d in val.shape), dtype_name(val.dtype)))
        self.env[node.name] = torch.utils._pytree.tree_map(stand_in, node.meta.get("val"))

    def _arguments(self, node) -> tuple[tuple, dict]:
        def value(a):
            return self.env.get(a.name) if isinstance(a, torch.fx.Node) else a
        return torch.fx.node.map_aggregate(node.args, value), torch.fx.node.map_aggregate(node.kwargs, value)

    def _item(self, node, seq, index) -> None:
        out = seq[index]
        if isinstance(out, Missing):
            self._unsupported(node, out.what)
        else:
            self.env[node.name] = out

    def _foldable(self, target, args, kwargs) -> bool:
        """True when PyTorch can evaluate the node now: every tensor argument is a constant and the op is not
        random (a random op must draw new numbers on every call)."""
        if not isinstance(target, torch._ops.OpOverload) or torch.Tag.nondeterministic_seeded in target.tags:
            return False
        values = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, Value)]
        return all(v.is_constant for v in values)

    def _fold(self, node, args, kwargs):
        def tensor(a):
            if not isinstance(a, Value):
                return a
            t = self.tensors.get(id(a))
            return torch.from_numpy(a.data.copy()) if t is None else t
        args, kwargs = torch.utils._pytree.tree_map(tensor, (args, kwargs))
        with torch.no_grad():
            out = node.target(*args, **kwargs)
        return torch.utils._pytree.tree_map(
            lambda t: self._constant(t, node.name) if isinstance(t, torch.Tensor) else t, out)

    def _build(self, output) -> Graph:
        values = [self.env.get(a.name) if isinstance(a, torch.fx.Node) else a for a in output.args[0]]
        outs, seen = [], set()
        for i, v in enumerate(values):
            if not isinstance(v, Value):
                raise UnsupportedFeatureError(f"output {i} of the module is {type(v).__name__}, not a tensor; "
                                              f"tilegrad compiles functions that return tensors")
            produced = not v.is_constant and id(v) not in self.inputs
            if not produced or id(v) in seen:  # an output that is an input, a constant or another output
                v = self.b.op("identity", v, name=f"output_{i}")
            seen.add(id(v))
            outs.append(v)
        names = ["output"] if len(outs) == 1 else [f"output_{i}" for i in range(len(outs))]
        return self.b.build(outs, names=names)


def _handler(target) -> Callable | None:
    packet = getattr(target, "overloadpacket", None)
    if packet is None or getattr(target, "namespace", None) != "aten":
        return None
    return TORCH_OPS.get(f"{packet.__name__}.{target._overloadname}") or TORCH_OPS.get(packet.__name__)


def _op_name(target) -> str:
    return str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))


def _by_schema(target, args: tuple, kwargs: dict) -> tuple[list, dict]:
    """The arguments in schema order: positional ones by position (gaps filled with the schema's defaults),
    keyword-only ones by name, so that a mapping's parameters may be named freely."""
    schema = target._schema.arguments
    positional = [a for a in schema if not a.kwarg_only]
    values = list(args)
    given = {a.name for a in positional[len(args):] if a.name in kwargs}
    last = max((i for i, a in enumerate(positional) if a.name in given), default=len(args) - 1)
    for a in positional[len(args):last + 1]:
        values.append(kwargs.get(a.name, a.default_value))
    keywords = {k: v for k, v in kwargs.items() if k not in {a.name for a in positional}}
    return values, keywords


def _check_result(node, out) -> None:
    """The mapping's outputs have the shapes and dtypes PyTorch says the node gives (a wrong mapping fails here,
    at its node, rather than as wrong numbers)."""
    vals = node.meta.get("val")
    outs, vals = (out, vals) if isinstance(out, tuple) else ((out,), (vals,))
    for v, val in zip(outs, vals):
        if not isinstance(v, Value) or not isinstance(val, torch.Tensor):
            continue
        want = (tuple(int(d) for d in val.shape), dtype_name(val.dtype))
        if (v.shape, v.dtype) != want:
            raise ShapeError(f"{_op_name(node.target)} at {location(node)}: tilegrad's mapping gives "
                             f"{v.dtype}{list(v.shape)}, PyTorch gives {want[1]}{list(want[0])}")


def _check_static(graph) -> None:
    """Every shape in the graph is a number: none depends on tensor values (nonzero, boolean masks) or is left
    symbolic."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    dynamic = []
    for node in graph.nodes:
        val = node.meta.get("val")
        if node.op == "call_function" and isinstance(val, torch.Tensor) and free_unbacked_symbols(val):
            dynamic.append(f"{_op_name(node.target)} gives shape {list(val.shape)} at {location(node)}")
    if dynamic:
        raise UnsupportedFeatureError(f"data-dependent shape: {'; '.join(dynamic)}; the size depends on tensor "
                                      f"values, and tilegrad compiles static shapes")
    for node in graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and not all(isinstance(d, int) for d in val.shape):
            raise UnsupportedFeatureError(f"{node.name} has the symbolic shape {list(val.shape)}; tilegrad compiles "
                                          f"static shapes (export without dynamic_shapes)")


def _check_mutations(program: torch.export.ExportedProgram) -> None:
    from torch.export.graph_signature import OutputKind

    mutated = [spec.target for spec in program.graph_signature.output_specs if spec.kind != OutputKind.USER_OUTPUT]
    if mutated:
        raise UnsupportedFeatureError(f"the module updates {', '.join(map(str, mutated))} when called (a batch norm "
                                      f"in training mode?); tilegrad compiles inference: call module.eval()")


def location(node) -> str:
    """Where an FX node comes from: the last frame of its stack trace and the submodule that called it, as
    `model.py:12 in forward [layers.0.ff.1: GELU]`."""
    parts = []
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', node.meta.get("stack_trace") or "")
    if frames:
        path, line, fn = frames[-1]
        parts.append(f"{path.rsplit('/', 1)[-1]}:{line} in {fn}")
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path, cls = list(stack.values())[-1]
        cls = cls.rsplit(".", 1)[-1] if isinstance(cls, str) else getattr(cls, "__name__", str(cls))
        if _module_path(path):
            parts.append(f"[{_module_path(path)}: {cls}]")
    return " ".join(parts) or f"node {node.name!r}"


def _module_path(path: str) -> str:
    """`L['self'].layers[0].ff` or `layers.0.ff` as `layers.0.ff`."""
    path = re.sub(r"^L\['self'\]\.?", "", path)
    return re.sub(r"\[['\"]?([^\]'\"]+)['\"]?\]", r".\1", path).strip(".")


def _uses(op: str, places: list[str], most: int = 4) -> str:
    """`op at a, at b` for the first `most` uses of `op`, and how many more there are."""
    shown = ", ".join(f"at {p}" for p in places[:most])
    return f"{op} {shown}" + (f" and {len(places) - most} more" if len(places) > most else "")
