"""The graph plan both executors print: kernel order and names, argument slots, weights and output copies."""

import numpy as np

from tilegrad.graph_plan import c_name, plan_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.runtime.slots import Copy, Slot


def _graph():
    b = GraphBuilder()
    x = b.input("x", (2, 6))
    w = b.const(np.ones(6, "float32"), "w")
    h = b.op("relu", b.op("add", x, w, name="add/1"))
    r = b.op("reshape", h, shape=(3, 4))
    return b.build([b.op("neg", r), x, w])


def test_kernels_run_in_order_named_after_their_nodes_with_their_slots():
    g = _graph()
    plan = plan_graph(g)
    assert [k.name for k in plan.kernels] == ["k0_add_1", "k1_relu", "k2_neg"]
    add, relu, neg = plan.kernels
    assert add.args[:2] == (Slot("input", 0), Slot("weight", 0))
    assert add.args[2].kind == "workspace" and relu.args[0] == add.args[2]
    assert neg.args[0] == relu.args[1]  # the reshape is a view: its root's bytes
    assert neg.args[1] == Slot("output", 0)


def test_outputs_no_kernel_writes_are_copied_from_where_their_bytes_are():
    plan = plan_graph(_graph())
    assert plan.copies == (Copy(1, Slot("input", 0), 48), Copy(2, Slot("weight", 0), 24))
    assert [w.name for w in plan.weights] == ["w"] and plan.derived == ()


def test_c_names():
    assert c_name("a/b.c") == "a_b_c" and c_name("3x") == "v_3x"


def test_kernels_whose_c_is_the_same_but_for_the_name_share_one_function():
    """A repeated block compiles once: the second relu(x + w) of the same shapes calls the first one's function,
    a different computation (another constant in the body) keeps its own, and the results are each their own."""
    from tilegrad.executor import compile_graph

    b = GraphBuilder()
    x = b.input("x", (2, 6))
    w1, w2 = b.const(np.full(6, 1.0, "float32"), "w1"), b.const(np.full(6, 2.0, "float32"), "w2")
    first = b.op("relu", b.op("add", x, w1, name="a"))
    second = b.op("relu", b.op("add", first, w2, name="b"))
    scaled = b.op("mul", second, b.const(np.array(3.0, "float32"), "three"), name="c")
    module = compile_graph(b.build([scaled]))
    functions = [s.function for s in module.spec.kernels]
    assert len(set(functions)) < len(functions)
    xs = np.linspace(-2, 2, 12, dtype="float32").reshape(2, 6)
    np.testing.assert_allclose(module(xs), 3 * np.maximum(np.maximum(xs + 1, 0) + 2, 0), rtol=1e-6)
