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


def test_a_repeated_computation_is_lowered_once():
    """Kernels whose computations and schedules are the same share one loop IR, named after the first: the
    printers print it once; a different computation gets its own."""
    from tilegrad.target import host

    b = GraphBuilder()
    x = b.input("x", (2, 6))
    w1, w2 = b.const(np.full(6, 1.0, "float32"), "w1"), b.const(np.full(6, 2.0, "float32"), "w2")
    first = b.op("relu", b.op("add", x, w1, name="a"))
    second = b.op("relu", b.op("add", first, w2, name="b"))
    g = b.build([b.op("mul", second, b.const(np.array(3.0, "float32"), "three"), name="c")])
    loops = [loop for _, loop, _ in plan_graph(g).lowered(None, host())]  # add, relu, add, relu, mul: unfused
    assert loops[2] is loops[0] and loops[3] is loops[1] and loops[2].name == "k0_a"
    assert len({id(loop) for loop in loops}) == 3


def test_weights_laid_out_alike_share_the_kernel_that_derives_them(tmp_path):
    """Two Winograd convolutions of one shape: both transformed weights come from one derivation kernel, in the
    compiled module and in the saved one loaded again."""
    import torch

    import tilegrad

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(16, 16, 3, padding=1)).eval()
    x = torch.randn(1, 16, 8, 8)
    module = tilegrad.compile(net, (x,))
    assert len(module.spec.derived) == 2 and len({d.kernel for d in module.spec.derived}) == 1
    want = net(x).detach().numpy()
    np.testing.assert_allclose(module(x.numpy()), want, rtol=1e-4, atol=1e-4)
    loaded = tilegrad.load(module.save(tmp_path / "m"))
    np.testing.assert_allclose(loaded(x.numpy()), want, rtol=1e-4, atol=1e-4)
