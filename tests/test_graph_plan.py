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
