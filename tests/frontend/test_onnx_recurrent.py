"""RNN, GRU and LSTM from ONNX, unrolled at import, against ONNX Runtime with random weights: every direction,
activation list, clip, initial states, constant sequence_lens, both layouts and subsets of the outputs."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tilegrad.errors import ShapeError, UnsupportedFeatureError
from tilegrad.frontend.onnx import import_onnx
from tilegrad.ir.interpret import run_reference

from .conftest import run_onnxruntime

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQ, BATCH, INPUT, HIDDEN = 5, 3, 4, 6


def _layer(op_type, *, direction="forward", layout=0, bias=True, lens=None, initial=False, peepholes=False,
           outputs=("Y", "Y_h", "Y_c"), seed=0, **attrs):
    """A one-node model of `op_type` with random weights as initializers, and its input X."""
    rng = np.random.default_rng(seed)
    dirs, g = (2 if direction == "bidirectional" else 1), GATES[op_type]

    def rand(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)
    inits = {"W": rand(dirs, g * HIDDEN, INPUT), "R": rand(dirs, g * HIDDEN, HIDDEN)}
    if bias:
        inits["B"] = rand(dirs, 2 * g * HIDDEN)
    if lens is not None:
        inits["sequence_lens"] = np.array(lens, np.int32)
    state = (BATCH, dirs, HIDDEN) if layout else (dirs, BATCH, HIDDEN)
    if initial:
        inits["initial_h"] = rand(*state)
        if op_type == "LSTM":
            inits["initial_c"] = rand(*state)
    if peepholes:
        inits["P"] = rand(dirs, 3 * HIDDEN)
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    names = [n if n in inits or n == "X" else "" for n in order]
    while names[-1] == "":
        names.pop()
    outs = [o for o in outputs if o != "Y_c" or op_type == "LSTM"]
    node = helper.make_node(op_type, names, outs, hidden_size=HIDDEN, direction=direction,
                            **({"layout": layout} if layout else {}), **attrs)
    x_shape = (BATCH, SEQ, INPUT) if layout else (SEQ, BATCH, INPUT)
    graph = helper.make_graph([node], "layer", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, rand(*x_shape)


CASES = [
    ("RNN", {}),
    ("RNN", {"direction": "reverse", "initial": True}),
    ("RNN", {"direction": "bidirectional", "activations": ["Relu", "LeakyRelu"], "activation_alpha": [0.3]}),
    ("RNN", {"activations": ["Affine"], "activation_alpha": [0.7], "activation_beta": [0.2]}),
    ("RNN", {"activations": ["ScaledTanh"], "activation_alpha": [1.5], "activation_beta": [0.6]}),
    ("RNN", {"activations": ["HardSigmoid"], "activation_alpha": [0.3], "activation_beta": [0.4]}),
    ("RNN", {"direction": "bidirectional", "activations": ["Elu", "ThresholdedRelu"],
             "activation_alpha": [0.5, 0.2]}),
    ("RNN", {"direction": "bidirectional", "activations": ["Softsign", "Softplus"]}),
    ("RNN", {"direction": "bidirectional", "activations": ["ThresholdedRelu", "ScaledTanh"]}),  # the defaults
    ("RNN", {"direction": "bidirectional", "activations": ["LeakyRelu", "Affine"], "activation_alpha": [0.3],
             "activation_beta": [0.5]}),  # Affine's alpha is its default, its beta the first given
    ("RNN", {"clip": 0.5, "layout": 1, "initial": True}),
    ("RNN", {"direction": "bidirectional", "lens": [5, 2, 4], "initial": True}),
    ("GRU", {}),
    ("GRU", {"linear_before_reset": 1, "direction": "reverse", "initial": True}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1, "bias": False}),
    ("GRU", {"direction": "bidirectional", "bias": False}),
    ("GRU", {"activations": ["HardSigmoid", "Softsign"], "activation_alpha": [0.25], "activation_beta": [0.45],
             "clip": 0.8}),
    ("GRU", {"layout": 1, "initial": True, "lens": [3, 5, 1], "direction": "bidirectional"}),
    ("GRU", {"outputs": ("", "Y_h")}),
    ("LSTM", {}),
    ("LSTM", {"peepholes": True, "initial": True}),
    ("LSTM", {"peepholes": True, "input_forget": 1, "direction": "reverse", "clip": 0.7}),
    ("LSTM", {"direction": "bidirectional", "layout": 1, "initial": True}),
    ("LSTM", {"direction": "bidirectional", "lens": [2, 5, 4], "peepholes": True, "initial": True}),
    ("LSTM", {"direction": "reverse", "lens": [4, 4, 4]}),
    ("LSTM", {"activations": ["Sigmoid", "ScaledTanh", "Affine"], "activation_alpha": [0.9, 0.5],
              "activation_beta": [1.1, 0.1]}),
    ("LSTM", {"outputs": ("", "", "Y_c")}),
    ("LSTM", {"outputs": ("Y",), "bias": False}),
]


def _expected(model, x):
    """ONNX Runtime's outputs; for layout 1, which its CPU kernels lack, those of the same layer in layout 0 with
    the inputs and outputs transposed."""
    attrs = {a.name: helper.get_attribute_value(a) for a in model.graph.node[0].attribute}
    if not attrs.get("layout"):
        return run_onnxruntime(model, {"X": x})
    flipped = type(model)()
    flipped.CopyFrom(model)
    node = flipped.graph.node[0]
    node.attribute.remove(next(a for a in node.attribute if a.name == "layout"))
    for init in flipped.graph.initializer:
        if init.name in ("initial_h", "initial_c"):
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).transpose(1, 0, 2).copy(), init.name))
    flipped.graph.input[0].CopyFrom(helper.make_tensor_value_info("X", TensorProto.FLOAT, (SEQ, BATCH, INPUT)))
    outs = run_onnxruntime(flipped, {"X": x.transpose(1, 0, 2).copy()})
    return [o.transpose(2, 0, 1, 3) if o.ndim == 4 else o.transpose(1, 0, 2) for o in outs]


@pytest.mark.parametrize("op_type,attrs", CASES, ids=lambda c: c if isinstance(c, str) else
                         "-".join(f"{k}={v}" for k, v in c.items()) or "defaults")
def test_layer_matches_onnxruntime(op_type, attrs):
    model, x = _layer(op_type, **attrs)
    g = import_onnx(model)
    got, want = run_reference(g, [x]), _expected(model, x)
    assert len(got) == len(want)
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)


def test_compiled_bidirectional_lstm_with_lengths_matches_onnxruntime():
    import tilegrad

    model, x = _layer("LSTM", direction="bidirectional", lens=[2, 5, 4], peepholes=True, initial=True)
    compiled = tilegrad.compile(model)
    got = compiled(x)
    for a, w in zip(got, run_onnxruntime(model, {"X": x})):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-5)
    packed = [s.name for s in compiled.spec.weights if s.name.endswith("_rec_wpack")]
    assert len(packed) == 2, packed  # the steps of a direction share its packed recurrent weights


def test_run_time_sequence_lengths_are_refused_like_other_run_time_operands():
    model, _ = _layer("RNN")
    model.graph.node[0].input.append("lens")
    model.graph.input.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [BATCH]))
    with pytest.raises(UnsupportedFeatureError, match="sequence_lens must be a constant"):
        import_onnx(model)


def test_bad_activations_and_lengths_are_named():
    model, _ = _layer("GRU", activations=["Sigmoid", "Gelu"])
    with pytest.raises(UnsupportedFeatureError, match="activation 'Gelu'"):
        import_onnx(model)
    model, _ = _layer("GRU", activations=["Sigmoid"])
    with pytest.raises(ShapeError, match="1 activation"):
        import_onnx(model)
    model, _ = _layer("RNN", lens=[6, 1, 1])
    with pytest.raises(ShapeError, match="sequence_lens"):
        import_onnx(model)


def test_too_long_a_sequence_is_refused_before_unrolling():
    from tilegrad.errors import ResourceLimitError

    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=1)
    graph = helper.make_graph([node], "long", [helper.make_tensor_value_info("X", TensorProto.FLOAT, (6000, 1, 1))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), n) for n in ("W", "R")])
    with pytest.raises(ResourceLimitError, match="6000 time step"):
        import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]))


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_pytorch_stacked_bidirectional_layer_matches_onnxruntime(kind):
    """torch.nn's two-layer bidirectional batch-first layer as its exporter writes it (initial states built by
    Shape/Expand, a Gemm head on the last step)."""
    import io
    import warnings

    import onnx
    import torch

    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(torch.nn, kind)(4, 8, num_layers=2, batch_first=True, bidirectional=True)
            self.head = torch.nn.Linear(16, 3)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    x = torch.randn(2, 5, 4)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Net().eval(), (x,), f, dynamo=False, opset_version=17, input_names=["x"])
    model = onnx.load_from_string(f.getvalue())
    assert kind in {n.op_type for n in model.graph.node}
    got = run_reference(import_onnx(model), [x.numpy()])[0]
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x.numpy()})[0], rtol=1e-5, atol=1e-6)
