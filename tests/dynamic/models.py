"""Small ONNX models with dynamic dimensions (dim_params), built here, for the tests of symbolic compilation."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def encoder_layer(d: int = 32, heads: int = 2, ff: int = 64, seed: int = 0) -> onnx.ModelProto:
    """A transformer encoder layer over x[batch, seq, d]: attention (reshape to heads by 0s, transposes, a scaled
    softmax over keys), residuals, layer norms and a ReLU feed-forward block, as exporters write one."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(array, name=None):
        t = numpy_helper.from_array(np.asarray(array), name=name or f"c{len(inits)}")
        inits.append(t)
        return t.name

    def weight(*shape):
        return const((rng.standard_normal(shape) * 0.2).astype(np.float32))

    def node(op, ins, **attrs):
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def linear(x, n_in, n_out):
        return node("Add", [node("MatMul", [x, weight(n_in, n_out)]), weight(n_out)])

    split = const(np.array([0, 0, heads, d // heads], np.int64))
    q, k, v = (node("Reshape", [linear("x", d, d), split]) for _ in range(3))
    q, k, v = (node("Transpose", [q], perm=[0, 2, 1, 3]), node("Transpose", [k], perm=[0, 2, 3, 1]),
               node("Transpose", [v], perm=[0, 2, 1, 3]))
    scores = node("Mul", [node("MatMul", [q, k]), const(np.array(1 / np.sqrt(d // heads), np.float32))])
    attended = node("Transpose", [node("MatMul", [node("Softmax", [scores], axis=-1), v])], perm=[0, 2, 1, 3])
    merged = node("Reshape", [attended, const(np.array([0, 0, d], np.int64))])
    h = node("LayerNormalization", [node("Add", ["x", linear(merged, d, d)]), weight(d), weight(d)], axis=-1)
    f = linear(node("Relu", [linear(h, d, ff)]), ff, d)
    node("LayerNormalization", [node("Add", [h, f]), weight(d), weight(d)], axis=-1)
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             ["batch", "seq", d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", d])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def pooled_rows(d: int = 8) -> onnx.ModelProto:
    """x[rows, d] -> the mean over the dynamic rows, and a row softmax over the dynamic axis of x^T: reductions
    whose length is the dynamic dimension."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["mean"], axes=[0], keepdims=0),
             helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
             helper.make_node("Softmax", ["xt"], ["soft"], axis=-1)]
    graph = helper.make_graph(nodes, "pooled", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", d])],
                              [helper.make_tensor_value_info("mean", TensorProto.FLOAT, [d]),
                               helper.make_tensor_value_info("soft", TensorProto.FLOAT, [d, "rows"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def exported_transformer(path, kind: str = "gpt2", seed: int = 0):
    """A two-layer GPT-2 or BERT from transformers (random weights), exported by torch.export's ONNX exporter with
    a dynamic sequence length `seq` (1 to 128), as a user would export one; `path` receives the model."""
    import torch
    import transformers
    from torch.export import Dim

    torch.manual_seed(seed)
    if kind == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=128)
        model = transformers.GPT2Model(config)
    else:
        config = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                         intermediate_size=128, vocab_size=500, max_position_embeddings=128)
        model = transformers.BertModel(config, add_pooling_layer=False)

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model.eval()

        def forward(self, ids):
            return self.model(input_ids=ids, use_cache=False).last_hidden_state if kind == "gpt2" else \
                self.model(input_ids=ids).last_hidden_state

    ids = torch.randint(0, 500, (1, 16))
    program = torch.onnx.export(LastHidden().eval(), (ids,), dynamic_shapes={"ids": {1: Dim("seq", min=1, max=128)}},
                                dynamo=True, verbose=False)
    program.save(str(path))
    return path


def masked_attention(heads: int = 2, d: int = 8) -> onnx.ModelProto:
    """softmax(q k^T / sqrt(d), hidden where `keep` is false) v over a dynamic query length `seq` and key length
    `keys`, behind torch's safe-softmax guard (a query that sees no key gives zeros), as the dynamo exporter
    writes SDPA with a boolean mask."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"]),
             helper.make_node("Mul", ["qk", "scale"], ["scores"]),
             helper.make_node("Where", ["keep", "scores", "hidden"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["p"], axis=-1),
             helper.make_node("IsNaN", ["p"], ["nan"]),
             helper.make_node("Where", ["nan", "zero", "p"], ["guarded"]),
             helper.make_node("MatMul", ["guarded", "v"], ["y"])]
    inits = [numpy_helper.from_array(np.array(d ** -0.5, np.float32), "scale"),
             numpy_helper.from_array(np.array(-np.inf, np.float32), "hidden"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, heads, "seq", d]),
              helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, heads, "keys", d]),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, heads, "keys", d]),
              helper.make_tensor_value_info("keep", TensorProto.BOOL, [1, 1, "seq", "keys"])]
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, heads, "seq", d])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def image_net(ceil_mode: int = 0, resize_scale: float = 2.0, seed: int = 0) -> onnx.ModelProto:
    """A small convolutional network over x[n, 3, h, w] with every window the dynamic image size meets: a strided
    7 x 7 stem, a max pool (`ceil_mode`), grouped, dilated, depthwise strided and 1 x 1 convolutions, a transposed
    convolution, an average pool that leaves padding out, a nearest Resize by `resize_scale`, a global average
    pool and a classifier; outputs the logits and the feature map before the Resize."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def weight(*shape):
        t = numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), f"w{len(inits)}")
        inits.append(t)
        return t.name

    def node(op, ins, out=None, **attrs):
        out = out or f"t{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def conv(x, cin, cout, k, stride=1, pad=0, dilation=1, group=1):
        return node("Relu", [node("Conv", [x, weight(cout, cin // group, k, k), weight(cout)], kernel_shape=[k, k],
                                  strides=[stride] * 2, pads=[pad] * 4, dilations=[dilation] * 2, group=group)])

    y = conv("x", 3, 16, 7, stride=2, pad=3)
    y = node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=ceil_mode)
    y = node("Add", [y, conv(y, 16, 16, 3, pad=1, group=4)])
    y = conv(conv(y, 16, 16, 3, pad=2, dilation=2), 16, 16, 3, stride=2, pad=1, group=16)
    y = conv(y, 16, 24, 1)
    y = node("ConvTranspose", [y, weight(24, 8, 2, 2)], kernel_shape=[2, 2], strides=[2, 2])
    feature = node("AveragePool", [y], "feature", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                   count_include_pad=0)
    scales = numpy_helper.from_array(np.array([1, 1, resize_scale, resize_scale], np.float32), "scales")
    inits.append(scales)
    y = node("Resize", [feature, "", "scales"], mode="nearest")
    y = node("Flatten", [node("GlobalAveragePool", [y])])
    node("Gemm", [y, weight(10, 8), weight(10)], "logits", transB=1)
    graph = helper.make_graph(
        nodes, "images", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 10]),
         helper.make_tensor_value_info("feature", TensorProto.FLOAT, ["n", 8, None, None])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
