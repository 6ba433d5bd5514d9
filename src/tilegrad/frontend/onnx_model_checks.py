"""The rules a model as a whole must keep, checked before any node converts, as ONNX Runtime checks them when it
creates a session: an IR version and opset this ONNX release defines, names that say which node or input they
mean (no two nodes, graph inputs, definitions of a value or different initializers sharing one), and graph outputs
of the element type the model declares. A model breaking them is contradictory: ONNX Runtime refuses it (or, for
initializers, picks one), and tilegrad refuses it, naming the rule, instead of compiling a guess."""

from __future__ import annotations

from collections import Counter

from .onnx_file import ModelFormatError


def check_model(proto) -> None:
    """Refuse `proto` if its versions are unknown or its main graph names something twice."""
    import onnx

    if proto.ir_version > onnx.IR_VERSION:
        raise ModelFormatError(f"the model's IR version is {proto.ir_version}; this ONNX ({onnx.__version__}) "
                               f"reads versions up to {onnx.IR_VERSION}")
    newest = onnx.defs.onnx_opset_version()
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx") and imp.version > newest:
            raise ModelFormatError(f"the model imports the default ONNX domain at opset {imp.version}; this ONNX "
                                   f"({onnx.__version__}) defines opsets up to {newest}")
    g = proto.graph
    _once("node name", [n.name for n in g.node if n.name])
    _once("graph input", [vi.name for vi in g.input])
    differing = _differing_repeats(g.initializer)
    if differing:
        raise ModelFormatError(f"initializer(s) {differing} appear more than once in the model's graph with different "
                               f"data: which one the model means is ambiguous (ONNX Runtime says it uses the last, "
                               f"yet computes some graphs with the first); keep one")
    sources = {vi.name for vi in g.input} | {t.name for t in g.initializer}
    defined = [y for n in g.node for y in n.output if y]
    _once("value defined by a node", defined)
    shadowing = sorted(sources.intersection(defined))
    if shadowing:
        raise ModelFormatError(f"node output(s) {shadowing} redefine a graph input or initializer of that name")


def check_declared_type(output, dtype: str) -> None:
    """Refuse graph output `output` (a ValueInfoProto) when it declares an element type other than `dtype`, the
    one the graph computes."""
    from .onnx_tensors import onnx_dtype

    tt = output.type.tensor_type if output.type.WhichOneof("value") == "tensor_type" else None
    if tt is None or not tt.elem_type:
        return
    declared = onnx_dtype(tt.elem_type, f"graph output {output.name!r}")
    if declared != dtype:
        raise ModelFormatError(f"graph output {output.name!r} is declared {declared}, but the graph computes "
                               f"{dtype}")


def _differing_repeats(initializers) -> list[str]:
    """The names of initializers given more than once with different contents (a repeat of the same tensor is
    harmless, and accepted as ONNX Runtime accepts it)."""
    first: dict[str, bytes] = {}
    differing = set()
    for t in initializers:
        data = t.SerializeToString()
        if first.setdefault(t.name, data) != data:
            differing.add(t.name)
    return sorted(differing)


def _once(what: str, names: list[str]) -> None:
    twice = sorted(n for n, k in Counter(names).items() if k > 1)
    if twice:
        raise ModelFormatError(f"{what}(s) {twice} appear more than once in the model's graph")
