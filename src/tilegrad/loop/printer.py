"""A readable printer for loop IR: one line per loop, guard, allocation and store; names as in the C."""

from __future__ import annotations

from ..te.printer import format_expr
from .ir import Allocate, Barrier, Buffer, For, IfThenElse, Kernel, Seq, Stmt, Store


def _buffer_decl(b: Buffer) -> str:
    dims = ", ".join(format_expr(d) for d in b.shape)
    return f"{b.name}: {b.dtype}[{dims}]"


def format_stmt(s: Stmt, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(s, For):
        kind = "" if s.kind == "serial" else f"{s.kind} "
        head = f"{pad}{kind}for {s.var.name} in 0..{format_expr(s.extent)}:"
        return head + "\n" + format_stmt(s.body, indent + 1)
    if isinstance(s, Store):
        idx = ", ".join(format_expr(i) for i in s.indices)
        return f"{pad}{s.buffer.name}[{idx}] = {format_expr(s.value)}"
    if isinstance(s, Seq):
        return "\n".join(format_stmt(x, indent) for x in s.stmts)
    if isinstance(s, IfThenElse):
        text = f"{pad}if {format_expr(s.cond)}:\n" + format_stmt(s.then, indent + 1)
        if s.orelse is not None:
            text += f"\n{pad}else:\n" + format_stmt(s.orelse, indent + 1)
        return text
    if isinstance(s, Allocate):
        return f"{pad}allocate {_buffer_decl(s.buffer)} {s.buffer.scope}\n" + format_stmt(s.body, indent)
    if isinstance(s, Barrier):
        return f"{pad}barrier"
    raise TypeError(f"no printer for {type(s).__name__}")


def format_kernel(k: Kernel) -> str:
    params = ", ".join(_buffer_decl(b) for b in k.params)
    return f"kernel {k.name}({params}):\n" + format_stmt(k.body, 1)
