"""A readable printer for graphs: one line per node, types on every value, constants marked."""

from __future__ import annotations

from .graph import Graph, Value


def _value(v: Value) -> str:
    return f"%{v.name}" + (f": const {v.type}" if v.is_constant else "")


def _attr(v) -> str:
    if isinstance(v, Graph):
        return "<" + " -> ".join(n.op for n in v.nodes) + ">"
    if isinstance(v, tuple):
        return "(" + ", ".join(_attr(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def format_graph(g: Graph) -> str:
    head = ", ".join(f"%{v.name}: {v.type}" for v in g.inputs)
    lines = [f"graph({head}) {{"]
    for n in g.nodes:
        outs = ", ".join(f"%{v.name}" for v in n.outputs)
        args = ", ".join(_value(v) for v in n.inputs)
        attrs = ", ".join(f"{k}={_attr(v)}" for k, v in n.attrs.items())
        types = ", ".join(str(v.type) for v in n.outputs)
        lines.append(f"  {outs} = {n.op}({args}){' {' + attrs + '}' if attrs else ''} : {types}")
    lines.append(f"  return {', '.join('%' + v.name for v in g.outputs)}")
    lines.append("}")
    return "\n".join(lines)
