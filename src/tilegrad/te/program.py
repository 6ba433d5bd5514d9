"""Expression DAGs numbered into straight-line programs: the one walk behind every evaluator of formulas.

`number(exprs)` visits each distinct subexpression once, operands before their users, and gives it a slot:
`Program.nodes[k]` is computed from the slots `Program.args[k]` (all below k), and `Program.outputs[i]` is the
slot of `exprs[i]`. Structurally equal nodes share one slot, so a value used by many formulas is computed once.
`Numbering` does the same for a DAG while it is built, slots in the order nodes were built. An evaluator is then a
loop over the slots with a table keyed by node class: `run` with `te.evaluate.EVAL_NUMPY` (`evaluate_numpy`,
`interpret`), the feature formulas' batched program (`tune.formulas`), the smoothing rules (`tune.smooth`), the
smoothed formulas' C tape (`tune.tape`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from . import expr as E


class Program:
    """An expression DAG as slots in an order where operands come first (see the module doc)."""

    __slots__ = ("nodes", "args", "outputs")

    def __init__(self, nodes: tuple[E.Expr, ...], args: tuple[tuple[int, ...], ...], outputs: tuple[int, ...]):
        self.nodes, self.args, self.outputs = nodes, args, outputs

    def __len__(self) -> int:
        return len(self.nodes)


class Numbering:
    """Slots for the distinct nodes of a DAG that may grow: `slot(e)` numbers `e` and whichever of its
    subexpressions are not numbered yet (operands first), and `program` is everything numbered so far. A node is
    identified by its class, dtype and operands' slots; a constant by its dtype and value, a variable, load or
    reduction by itself. Numbering nodes as they are built keeps the slots in the order they were built."""

    def __init__(self):
        self.nodes: list[E.Expr] = []
        self.args: list[tuple[int, ...]] = []
        self._slots: dict[object, int] = {}
        self._by_id: dict[int, int] = {}  # id of a node met -> its slot, found without hashing the node
        self._met: list[E.Expr] = []  # the nodes met that share another's slot, kept alive so their ids stay theirs

    def slot(self, root: E.Expr) -> int:
        hit = self._by_id.get(id(root))
        return hit if hit is not None else self._visit(root, 0)

    def _visit(self, e: E.Expr, depth: int) -> int:
        """Number `e`, not numbered yet, after its operands (the last one first)."""
        t = type(e)
        if t is E.Const:
            key, operands = (e.dtype, e.value), ()
        elif t is E.Var:
            key, operands = e, ()
        elif depth > _RECURSION_DEPTH:
            return self._walk(e)
        else:
            by_id, visit = self._by_id, self._visit
            found = []
            for k in reversed(e.children()):
                s = by_id.get(id(k))
                found.append(s if s is not None else visit(k, depth + 1))
            operands = tuple(reversed(found))
            key = e if t in _BY_NODE else (t, e.dtype, operands)
        slot = self._by_id[id(e)] = self._add(e, key, operands)
        return slot

    def _walk(self, root: E.Expr) -> int:
        """`_visit` with a stack of its own instead of Python's, for deep formulas."""
        by_id = self._by_id
        stack = [root]
        while stack:
            e = stack[-1]
            if id(e) in by_id:
                stack.pop()
                continue
            children = e.children()
            pending = [k for k in children if id(k) not in by_id]
            if pending:
                stack += pending
                continue
            stack.pop()
            if children:
                operands = tuple([by_id[id(k)] for k in children])
                t = type(e)
                by_id[id(e)] = self._add(e, e if t in _BY_NODE else (t, e.dtype, operands), operands)
            else:
                self._visit(e, 0)
        return by_id[id(root)]

    def _add(self, e: E.Expr, key: object, operands: tuple[int, ...]) -> int:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = len(self.nodes)
            self.nodes.append(e)
            self.args.append(operands)
        else:
            self._met.append(e)
        return slot

    def program(self, outputs: Sequence[E.Expr]) -> Program:
        """The program of every node numbered so far (and of `outputs`), whose outputs are `outputs`."""
        slots = tuple(self.slot(e) for e in outputs)
        return Program(tuple(self.nodes), tuple(self.args), slots)


_RECURSION_DEPTH = 200  # nesting the walk recurses to (fast); deeper nodes get a stack of their own (`_walk`)
_BY_NODE = (E.Load, E.Reduce)  # nodes with fields besides their operands (a buffer, axes): keyed by themselves


def number(exprs: Sequence[E.Expr]) -> Program:
    """The program computing `exprs`, each distinct subexpression once."""
    return Numbering().program(exprs)


def run(program: Program, table: Mapping[type, Callable], structural: Mapping[type, Callable]) -> list:
    """The value of each output of `program`: slot by slot, `structural[cls](node, *operands)` for the node
    classes it has (leaves, casts, loads: what needs the node itself), else `table[cls](*operands)`."""
    values: list = []
    for node, args in zip(program.nodes, program.args):
        t = type(node)
        rule = structural.get(t)
        if rule is not None:
            values.append(rule(node, *[values[a] for a in args]))
        else:
            values.append(table[t](*[values[a] for a in args]))
    return [values[k] for k in program.outputs]
