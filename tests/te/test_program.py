"""The numbering of expression DAGs into programs, and the NumPy run of a program."""

import numpy as np

from tilegrad.te import expr as E
from tilegrad.te.evaluate import EVAL_NUMPY, evaluate_numpy, numpy_cast, numpy_const
from tilegrad.te.program import Numbering, number, run

a, b = E.Var("a"), E.Var("b")


def test_equal_subexpressions_share_a_slot_and_operands_come_first():
    s1, s2 = a * b + 1, E.Var("a") * E.Var("b")  # s2 is s1's product, built again
    program = number([s1, s2 - 1, s1])
    assert program.outputs[0] == program.outputs[2]
    assert program.nodes[program.outputs[1]].a is s2  # the rebuilt product has the first one's slot
    products = [k for k, e in enumerate(program.nodes) if type(e) is E.Mul]
    assert len(products) == 1 and len(program) == len(set(map(id, program.nodes)))
    assert all(all(x < k for x in args) for k, args in enumerate(program.args))
    assert len([e for e in program.nodes if type(e) is E.Const]) == 1  # the two 1s


def test_constants_of_other_dtypes_keep_their_own_slots():
    program = number([E.Const(1, "int32"), E.Const(1, "int64"), E.Const(1.0, "float64"), E.Const(True, "bool")])
    assert len(set(program.outputs)) == 4


def test_loads_of_other_buffers_are_other_slots():
    class Buffer:
        def __init__(self, name):
            self.name, self.shape, self.dtype = name, (4,), "float32"

    x, y = E.Load(Buffer("x"), (a,)), E.Load(Buffer("y"), (a,))
    assert len(set(number([x, y]).outputs)) == 2


def test_deep_formulas_number_without_recursion():
    e = a
    for k in range(5000):
        e = e + k
    program = number([e])
    assert len(program) == 1 + 4999 + 4999  # a, the constants 1..4999 and their sums (a + 0 folds to a)


def test_run_evaluates_with_the_numpy_table():
    e = E.select(a < b, a * 2, b // 3) + E.cast("int64", E.Var("x", "float64"))
    env = {"a": np.arange(6), "b": np.full(6, 3), "x": np.linspace(0, 2, 6)}
    structural = {E.Const: numpy_const, E.Var: lambda v: env[v.name], E.Cast: numpy_cast}
    (got,) = run(number([e]), EVAL_NUMPY, structural)
    np.testing.assert_array_equal(got, evaluate_numpy(e, env))
    np.testing.assert_array_equal(got, np.where(env["a"] < 3, env["a"] * 2, 1) + env["x"].astype(np.int64))


def test_a_growing_numbering_keeps_the_ids_it_knows():
    """Nodes that share another's slot are kept alive: a node built later at a freed one's address is new."""
    numbering = Numbering()
    for k in range(2, 200):
        numbering.slot(a + 1)  # from the second time on, a node that only the numbering still holds
        e = a * k
        assert numbering.nodes[numbering.slot(e)] is e
