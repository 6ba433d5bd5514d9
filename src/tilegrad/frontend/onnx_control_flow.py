"""ONNX control flow resolved while importing: If, Loop, Scan and SequenceMap become the nodes of their subgraphs.

tilegrad compiles a static graph, so the control decisions must be known at import time: an If whose condition
is a constant after folding inlines the chosen branch; a Loop whose trip count and condition are constants (or
whose condition folds to a constant each iteration) is unrolled, its scan outputs stacked; a Scan is unrolled
over the static length of its scan inputs; SequenceMap inlines its body once per element. A subgraph reads the
values of the scopes around it by name. A condition computed at run time raises the `UnsupportedFeatureError`
of any run-time shape-like operand. The reader (`onnx.py`) imports this module, which registers these mappings.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping

import numpy as np

from ..errors import ResourceLimitError, ShapeError, UnsupportedFeatureError
from .onnx_builder import OnnxBuilder as B
from .onnx_file import ModelFormatError
from .onnx_nodes import convert_node
from .onnx_op_table import constant_input, onnx_op
from .onnx_schema import tensor_type
from .onnx_sequences import OptionalValue, TensorSequence, stack
from .onnx_tensors import onnx_dtype

MAX_UNROLLED_NODES = 10_000  # body nodes one Loop, Scan or SequenceMap may unroll into
MAX_INLINED_NODES = 100_000  # subgraph nodes a whole model may inline (nested loops multiply)


def inline(b: B, graph, inputs, scope: Mapping, prefix: str) -> list:
    """The outputs of subgraph `graph` with its formal inputs bound to `inputs`, its nodes converted into `b`;
    names it does not define resolve through `scope`, the values of the enclosing graphs."""
    b.inlined += len(graph.node)
    if b.inlined > MAX_INLINED_NODES:
        raise ResourceLimitError(f"{prefix!r} inlines more than {MAX_INLINED_NODES} subgraph nodes in all (nested "
                                 f"If, Loop or Scan bodies unrolled)")
    if len(graph.input) != len(inputs):
        raise ModelFormatError(f"subgraph {graph.name!r} (in {prefix!r}) declares {len(graph.input)} input(s); "
                               f"its node passes {len(inputs)}")
    values = ChainMap({formal.name: _as_declared(formal, v) for formal, v in zip(graph.input, inputs)}, scope)
    for i, node in enumerate(graph.node):
        name = f"{prefix}_{node.name or f'{node.op_type}_{i}'}"
        outs = convert_node(b, node, name, values)
        if outs is None:
            lost = [x for x in node.input if x and values[x] is None]
            raise UnsupportedFeatureError(f"{node.op_type} (node {name!r}) reads {lost}, which could not be "
                                          f"converted")
        for y in node.output:
            if y:
                values[y] = outs.get(y)
    missing = [vo.name for vo in graph.output if vo.name not in values]
    if missing:
        raise ModelFormatError(f"subgraph {graph.name!r} (in {prefix!r}) never computes its output(s) {missing}")
    return [values[vo.name] for vo in graph.output]


def _as_declared(formal, v):
    """`v` bound to a subgraph input: an optional where the input is declared one (a Loop whose body makes a
    sequence carries it into an optional input)."""
    if formal.type.WhichOneof("value") != "optional_type" or v is None or isinstance(v, OptionalValue):
        return v
    return OptionalValue(v, f"optional({getattr(v, 'onnx_type', None) or tensor_type(v.dtype)})")


def _results(outs):
    return outs[0] if len(outs) == 1 else tuple(outs)


def _check_unrolled(name: str, op_type: str, steps: int, body) -> None:
    """Refuse more than MAX_UNROLLED_NODES body nodes; a body without nodes counts as one, so that a loop whose
    condition stays true still ends."""
    if steps * max(len(body.node), 1) > MAX_UNROLLED_NODES:
        raise ResourceLimitError(f"{op_type} (node {name!r}) unrolls {steps} iteration(s) of a {len(body.node)}-node "
                                 f"body, more than the limit of {MAX_UNROLLED_NODES} nodes")


def _check_outputs(name: str, op_type: str, body, least: int) -> None:
    if len(body.output) < least:
        raise ModelFormatError(f"{op_type} (node {name!r}): its body has {len(body.output)} output(s), fewer than "
                               f"the {least} its inputs need")


def _flag(v, what: str, name: str) -> bool:
    data = constant_input(v, what, name)
    if data.size != 1:
        raise ShapeError(f"node {name!r}: {what} must hold one element, got shape {list(data.shape)}")
    return bool(data.reshape(()))


@onnx_op("If")
def _if(b: B, name, cond, *, then_branch, else_branch):
    """The branch the constant condition chooses, inlined."""
    scope = b.scope
    taken = _flag(cond, "the condition", name)
    branch, label = (then_branch, "then") if taken else (else_branch, "else")
    return _results(inline(b, branch, [], scope, f"{name}_{label}"))


@onnx_op("Loop")
def _loop(b: B, name, trip_count=None, cond=None, *initial, body):
    """The body unrolled while the iteration count is below the trip count and the condition holds; the final
    loop-carried values, then each scan output stacked over the iterations."""
    scope = b.scope
    limit = None if trip_count is None else _trip_count(trip_count, name)
    if limit is None and cond is None:
        raise UnsupportedFeatureError(f"Loop (node {name!r}) has neither a trip count nor a condition; it would run "
                                      f"forever")
    going = True if cond is None else _flag(cond, "the condition", name)
    _check_outputs(name, "Loop", body, 1 + len(initial))
    carried, scans, i = list(initial), [[] for _ in range(len(body.output) - 1 - len(initial))], 0
    if limit is not None:
        _check_unrolled(name, "Loop", limit, body)
    while going and (limit is None or i < limit):
        _check_unrolled(name, "Loop", i + 1, body)
        counter = b.const(np.array(i, np.int64), f"{name}_iteration")
        outs = inline(b, body, [counter, b.const(np.array(True), f"{name}_cond"), *carried], scope, f"{name}_{i}")
        going = _flag(outs[0], "the condition its body computes", name)
        carried = outs[1:1 + len(carried)]
        for values, v in zip(scans, outs[1 + len(carried):]):
            values.append(v)
        i += 1
    return _results(carried + [stack(b, f"{name}_scan_{k}", values) for k, values in enumerate(scans)])


def _trip_count(trip_count, name: str) -> int:
    data = constant_input(trip_count, "the trip count", name)
    if data.size != 1:
        raise ShapeError(f"node {name!r}: the trip count must hold one element, got shape {list(data.shape)}")
    return max(int(data.reshape(())), 0)


@onnx_op("Scan")
def _scan(b: B, name, *inputs, body, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
          scan_output_axes=None, scan_output_directions=None, **opset_8):
    """The body unrolled over the scan inputs' common extent: slice t of each scan input (from the end for a
    reverse direction) with the states; the final states, then the scan outputs stacked along their axes."""
    scope = b.scope
    if b.opset < 9 or opset_8:
        raise UnsupportedFeatureError(f"Scan (node {name!r}) at opset {b.opset}: the opset-8 form (a batch axis and "
                                      f"sequence_lens) is not supported; opset 9 and later are")
    if not 1 <= num_scan_inputs <= len(inputs):
        raise ModelFormatError(f"Scan (node {name!r}): num_scan_inputs={num_scan_inputs}, but it has "
                               f"{len(inputs)} input(s)")
    states, xs = list(inputs[:len(inputs) - num_scan_inputs]), inputs[len(inputs) - num_scan_inputs:]
    _check_outputs(name, "Scan", body, len(states))
    n_out = len(body.output) - len(states)
    in_axes = list(scan_input_axes or [0] * len(xs))
    in_reverse = list(scan_input_directions or [0] * len(xs))
    out_axes = list(scan_output_axes or [0] * n_out)
    out_reverse = list(scan_output_directions or [0] * n_out)
    for what, given, want in (("scan_input_axes", in_axes, len(xs)), ("scan_input_directions", in_reverse, len(xs)),
                              ("scan_output_axes", out_axes, n_out), ("scan_output_directions", out_reverse, n_out)):
        if len(given) != want:
            raise ModelFormatError(f"Scan (node {name!r}): {what} has {len(given)} entries; it needs {want}")
    in_axes = [_axis(a, len(x.shape), name) for a, x in zip(in_axes, xs)]
    lengths = {x.shape[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise ShapeError(f"Scan (node {name!r}): its scan inputs have different lengths {sorted(lengths)}")
    steps = lengths.pop()
    _check_unrolled(name, "Scan", steps, body)
    scans = [[] for _ in range(n_out)]
    for t in range(steps):
        sliced = [b.op("gather", x, b.const(np.array(steps - 1 - t if rev else t, np.int64), f"{name}_t"),
                       name=f"{name}_{t}_in", axis=a) for x, a, rev in zip(xs, in_axes, in_reverse)]
        outs = inline(b, body, [*states, *sliced], scope, f"{name}_{t}")
        states = outs[:len(states)]
        for values, v in zip(scans, outs[len(states):]):
            values.append(v)
    stacked = [stack(b, f"{name}_scan_{k}", values[::-1] if rev else values, axis)
               for k, (values, axis, rev) in enumerate(zip(scans, out_axes, out_reverse))]
    return _results(states + stacked)


def _axis(axis: int, rank: int, name: str) -> int:
    if not -rank <= axis < rank:
        raise ShapeError(f"Scan (node {name!r}): scan axis {axis} is outside [-{rank}, {rank - 1}]")
    return axis % rank


@onnx_op("SequenceMap")
def _sequence_map(b: B, name, seq, *others, body):
    """The body inlined once per element of the sequence(s); tensor inputs go to every call unchanged."""
    scope = b.scope
    if not isinstance(seq, TensorSequence):
        raise ShapeError(f"SequenceMap (node {name!r}) takes a sequence first, but its input is a tensor")
    n = len(seq.items)
    for v in others:
        if isinstance(v, TensorSequence) and len(v.items) != n:
            raise ShapeError(f"SequenceMap (node {name!r}): its sequences have different lengths")
    _check_unrolled(name, "SequenceMap", n, body)
    results = [[] for _ in body.output]
    for k in range(n):
        args = [v.items[k] if isinstance(v, TensorSequence) else v for v in (seq, *others)]
        for values, v in zip(results, inline(b, body, args, scope, f"{name}_{k}")):
            values.append(v)
    dtypes = [vo.type.tensor_type.elem_type for vo in body.output]
    where = f"SequenceMap (node {name!r}): its body's output"
    return _results([TensorSequence(tuple(values), values[0].dtype if values else onnx_dtype(d, where))
                     for values, d in zip(results, dtypes)])
