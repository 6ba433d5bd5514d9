"""ONNX import of real and hostile models: what exporters write (a dynamo-exported CNN, constant subgraphs of ops
tilegrad lacks), external data beside the model and outside it, names made of C code, long chains, huge shapes,
and malformed nodes, each refused by one `TilegradError` that names the node, the op and the reason."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.errors import ResourceLimitError, ShapeError, TilegradError, UnsupportedOpError
from tilegrad.frontend.onnx import import_onnx, read_onnx
from tilegrad.frontend.onnx_file import ModelFormatError, load_model
from tilegrad.mapped import release_pages

DATA = Path(__file__).parent / "data"
RNG = np.random.default_rng(0)
C_CODE = 'x"); system("rm -rf /"); //'


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _ort(model, feeds):
    import onnxruntime as ort

    source = str(model) if isinstance(model, Path) else model.SerializeToString()
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, feeds)


# ---- what exporters write ----

def test_cnn_from_the_dynamo_exporter_matches_onnxruntime():
    """A CNN written by torch 2.13's default exporter (`torch.onnx.export(..., dynamo=True)`; the file was made by
    tests/frontend/data/make_dynamo_cnn.py): opset 18, Reshape with allowzero=1."""
    path = DATA / "cnn_dynamo.onnx"
    model = onnx.load(path)
    assert any(a.name == "allowzero" and a.i == 1 for n in model.graph.node if n.op_type == "Reshape"
               for a in n.attribute)
    x = RNG.standard_normal((2, 3, 16, 16)).astype("float32")
    name = model.graph.input[0].name
    np.testing.assert_allclose(tilegrad.compile(path)(**{name: x}), _ort(path, {name: x})[0], rtol=1e-4, atol=1e-5)


def test_reshape_allowzero_without_a_zero_is_a_reshape():
    shape = numpy_helper.from_array(np.array([2, -1], "int64"), "shape")
    model = _model([helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)], [_vi("x", [2, 3, 4])],
                   [_vi("y", [2, 12])], [shape])
    x = RNG.standard_normal((2, 3, 4)).astype("float32")
    np.testing.assert_array_equal(tilegrad.compile(model)(x), x.reshape(2, 12))


def test_a_constant_subgraph_of_an_op_without_a_mapping_folds_before_anything_is_refused():
    """Mod has no mapping, but both its inputs are constants (the legacy exporter writes such subgraphs): ONNX's
    reference implementation folds it, and the model compiles."""
    inits = [numpy_helper.from_array(np.array([12], "int64"), "twelve"),
             numpy_helper.from_array(np.array([5], "int64"), "five"),
             numpy_helper.from_array(np.array([3], "int64"), "three")]
    nodes = [helper.make_node("Mod", ["twelve", "five"], ["two"], name="mod"),
             helper.make_node("Concat", ["two", "three"], ["target"], name="cat", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape")]
    model = _model(nodes, [_vi("x", [6])], [_vi("y", [2, 3])], inits)
    x = np.arange(6, dtype="float32")
    np.testing.assert_array_equal(tilegrad.compile(model)(x), _ort(model, {"x": x})[0])


def test_legacy_exported_transformer_with_a_constant_mod_matches_onnxruntime():
    torch = pytest.importorskip("torch")

    class Heads(torch.nn.Module):
        """Splits the features into heads, padding them to a multiple of 4 (`d % 4`, a Mod of shape numbers)."""

        def __init__(self):
            super().__init__()
            self.layer = torch.nn.TransformerEncoderLayer(10, 2, 24, dropout=0.0, batch_first=True)

        def forward(self, x):
            pad = (4 - x.shape[-1] % 4) % 4
            return torch.nn.functional.pad(self.layer(x), (0, pad))

    import io
    import warnings

    torch.manual_seed(0)
    f = io.BytesIO()
    x = torch.randn(2, 5, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Heads().eval(), (x,), f, dynamo=False, opset_version=17, input_names=["x"])
    model = onnx.load_from_string(f.getvalue())
    assert "Mod" in {n.op_type for n in model.graph.node}
    np.testing.assert_allclose(tilegrad.compile(model)(x.numpy()), _ort(model, {"x": x.numpy()})[0], rtol=1e-4,
                               atol=1e-5)


# ---- external data ----

def _with_external_data(directory: Path) -> tuple[Path, np.ndarray]:
    w = RNG.standard_normal((4, 4)).astype("float32")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", [2, 4])], [_vi("y", [2, 4])],
                   [numpy_helper.from_array(w, "w")])
    path = directory / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="model.onnx.data",
              size_threshold=0)
    assert (directory / "model.onnx.data").is_file()
    return path, w


def test_external_data_is_read_beside_the_model_from_any_working_directory(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "elsewhere").mkdir()
    path, w = _with_external_data(tmp_path / "models")
    monkeypatch.chdir(tmp_path / "elsewhere")
    x = RNG.standard_normal((2, 4)).astype("float32")
    np.testing.assert_allclose(tilegrad.compile(Path("..") / "models" / "model.onnx")(x), x @ w, rtol=1e-5)
    with pytest.raises(ModelFormatError, match="pass the model's path"):
        import_onnx(path.read_bytes())


def _point_external_data(path: Path, location: str) -> None:
    model = onnx.load(path, load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    path.write_bytes(model.SerializeToString())


@pytest.mark.parametrize("where", ["absolute", "dotdot", "link"])
def test_external_data_outside_the_model_directory_is_refused(tmp_path, where):
    (tmp_path / "models").mkdir()
    path, _ = _with_external_data(tmp_path / "models")
    secret = tmp_path / "secret.bin"
    secret.write_bytes((tmp_path / "models" / "model.onnx.data").read_bytes())  # the right size, elsewhere
    if where == "absolute":
        _point_external_data(path, str(secret))
    elif where == "dotdot":
        _point_external_data(path, "../secret.bin")
    else:
        os.symlink(secret, tmp_path / "models" / "link.bin")
        _point_external_data(path, "link.bin")
    with pytest.raises(ModelFormatError, match="outside the model's directory") as info:
        import_onnx(path)
    assert "'w'" in str(info.value)
    with pytest.raises(ModelFormatError, match="outside the model's directory"):
        tilegrad.compile(path)  # (which maps external data rather than reading it: checked the same)


def test_compiling_maps_external_data_and_a_forged_mark_is_refused(tmp_path):
    """compile maps a model's external data (read-only views of the file, pages handed back once read) and
    gives the same results; a ModelProto that claims its external references were checked is refused."""
    path, w = _with_external_data(tmp_path)
    proto = load_model(path, map_external=True)
    (weight,) = import_onnx(proto).constants
    assert not weight.data.flags.writeable and not weight.data.flags.owndata
    np.testing.assert_array_equal(weight.data, w)
    release_pages(weight.data)
    np.testing.assert_array_equal(weight.data, w)  # read again from the file
    x = RNG.standard_normal((2, 4)).astype("float32")
    module = tilegrad.compile(path)
    (tmp_path / "model.onnx.data").write_bytes(b"")  # the file rewritten after compiling: the module owns its weights
    np.testing.assert_allclose(module(x), x @ w, rtol=1e-5)

    forged = onnx.load(path, load_external_data=False)
    entry = forged.graph.initializer[0].external_data.add()
    entry.key, entry.value = "tilegrad-mapped-0123456789abcdef", "1"
    with pytest.raises(ModelFormatError, match="pass the model's path"):
        tilegrad.compile(forged)


def test_a_model_with_external_data_and_open_dimensions_compiles_per_call(tmp_path):
    w = RNG.standard_normal((4, 4)).astype("float32")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", ["n", 4])], [_vi("y", ["n", 4])],
                   [numpy_helper.from_array(w, "w")])
    path = tmp_path / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    module = tilegrad.compile(path)
    for n in (1, 3):
        x = RNG.standard_normal((n, 4)).astype("float32")
        np.testing.assert_allclose(module(x), x @ w, rtol=1e-5)


# ---- names, chains, sizes ----

def test_names_made_of_c_code_compile_and_run():
    names = {"x": C_CODE, "w": "*/ int main(void) { return 1; } /*", "y": 'y\\"\n#include <stdio.h>'}
    w = RNG.standard_normal((3, 3)).astype("float32")
    nodes = [helper.make_node("MatMul", [names["x"], names["w"]], ["m"], name=C_CODE),
             helper.make_node("Relu", ["m"], [names["y"]], name="%s%n\\")]
    model = _model(nodes, [_vi(names["x"], [2, 3])], [_vi(names["y"], [2, 3])],
                   [numpy_helper.from_array(w, names["w"])])
    mod = tilegrad.compile(model)
    assert mod.input_names == [names["x"]] and mod.output_names == [names["y"]]
    x = RNG.standard_normal((2, 3)).astype("float32")
    np.testing.assert_allclose(mod(x), np.maximum(x @ w, 0), rtol=1e-5)
    np.testing.assert_allclose(mod(**{names["x"]: x}), np.maximum(x @ w, 0), rtol=1e-5)


def test_a_chain_of_246_elementwise_ops_compiles():
    ops = ["Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Exp"]
    nodes = [helper.make_node(ops[i % len(ops)], [f"v{i}"], [f"v{i + 1}"], name=f"n{i}") for i in range(246)]
    model = _model(nodes, [_vi("v0", [4, 8])], [_vi("v246", [4, 8])])
    x = RNG.standard_normal((4, 8)).astype("float32")
    np.testing.assert_allclose(tilegrad.compile(model)(x), _ort(model, {"v0": x})[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["input", "expand", "tile", "constant_of_shape", "initializer"])
def test_huge_shapes_are_refused_at_once(case):
    huge = np.array([10**6, 10**6], "int64")
    inputs, inits = [_vi("x", [1, 1])], [numpy_helper.from_array(huge, "huge")]
    if case == "input":
        inputs, node = [_vi("x", [10**6, 10**6])], helper.make_node("Relu", ["x"], ["y"], name="big")
    elif case == "expand":
        node = helper.make_node("Expand", ["x", "huge"], ["y"], name="big")
    elif case == "tile":
        node = helper.make_node("Tile", ["x", "huge"], ["y"], name="big")
    elif case == "constant_of_shape":
        node = helper.make_node("ConstantOfShape", ["huge"], ["y"], name="big")
    else:
        inits.append(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[10**6, 10**6]))
        node = helper.make_node("Add", ["x", "w"], ["y"], name="big")
    model = _model([node], inputs, [_vi("y", [1, 1])], inits)
    t0 = time.perf_counter()
    with pytest.raises(ResourceLimitError, match="elements: more than"):
        import_onnx(model)
    assert time.perf_counter() - t0 < 5


# ---- malformed nodes and several problems at once ----

@pytest.mark.parametrize("node,fragment", [
    (helper.make_node("Concat", ["x", "x"], ["y"], name="cat"), "lacks the required attribute(s) ['axis']"),
    (helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1.5), "attribute 'axis' is FLOAT"),
    (helper.make_node("Relu", ["x"], ["y"], name="r", flavour=2), "attribute 'flavour'"),
    (helper.make_node("Relu", ["nowhere"], ["y"], name="r"), "reads 'nowhere'"),
    (helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 0]), "Transpose"),
    (helper.make_node("Gather", ["x", "x"], ["y"], name="g"), "Gather"),
])
def test_malformed_nodes_name_the_node_and_the_op(node, fragment):
    model = _model([node], [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    with pytest.raises(TilegradError) as info:
        import_onnx(model)
    text = str(info.value)
    assert fragment in text and repr(node.name) in text, text
    assert node.op_type in text, text


@pytest.mark.parametrize("node,constant,fragment", [
    (helper.make_node("Reshape", ["x", "c"], ["y"], name="flat"), helper.make_tensor("c", TensorProto.INT64, [], [6]),
     "node 'flat': Reshape's target shape must be a 1-D tensor"),
    (helper.make_node("ConvTranspose", ["x", "c"], ["y"], name="up"),
     helper.make_tensor("c", TensorProto.FLOAT, [2, 1, 1, 1], [1.0, 1.0]),
     "node 'up': ConvTranspose's weight [2, 1, 1, 1] must have the rank of its input [2, 3]"),
])
def test_a_constant_input_of_the_wrong_rank_is_refused_naming_the_node(node, constant, fragment):
    model = _model([node], [_vi("x", [2, 3])], [_vi("y", None)], [constant])
    with pytest.raises(ShapeError, match=re.escape(fragment)):
        import_onnx(model)


def test_every_unsupported_op_and_feature_is_listed_at_once():
    nodes = [helper.make_node("Frobnicate", ["x"], ["a"], name="frob"),
             helper.make_node("LpNormalization", ["x"], ["b"], name="lpnorm", p=3),
             helper.make_node("LpNormalization", ["x"], ["c"], name="lpnorm4", p=4),
             helper.make_node("Relu", ["a"], ["d"], name="after_frob"),
             helper.make_node("StringNormalizer", ["x"], ["e"], name="strnorm")]
    model = _model(nodes, [_vi("x", [2, 3])], [_vi(n, [2, 3]) for n in "bcde"], opset=20)
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(model)
    text = str(info.value)
    assert "2 op(s) not supported: Frobnicate (node 'frob'), StringNormalizer (node 'strnorm')" in text, text
    assert "'lpnorm'" in text and "p=3" in text and "'lpnorm4'" in text and "p=4" in text
    assert "after_frob" not in text  # it only reads what an unsupported op makes
    problems = read_onnx(model).problems
    assert [(p.node, p.unsupported_op) for p in problems] == [("frob", True), ("lpnorm", False), ("lpnorm4", False),
                                                              ("strnorm", True)]


def test_a_symbolic_dimension_left_open_names_the_input_and_the_dimension():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, "seq"])], [_vi("y", [2, "seq"])])
    with pytest.raises(ShapeError, match=r"input 'x' has a symbolic dimension 'seq' \(dimension 1 of 2\)"):
        import_onnx(model)
    with pytest.raises(ShapeError, match="fixes its dimension 0 to 2"):
        import_onnx(model, input_shapes={"x": (3, 5)})
    with pytest.raises(ShapeError, match="1 dimension"):
        import_onnx(model, input_shapes={"x": (5,)})
    assert import_onnx(model, input_shapes={"x": (2, 5)}).inputs[0].shape == (2, 5)


def test_an_empty_result_is_an_empty_constant():
    starts = numpy_helper.from_array(np.array([2], "int64"), "s")
    ends = numpy_helper.from_array(np.array([2], "int64"), "e")
    model = _model([helper.make_node("Slice", ["x", "s", "e"], ["y"], name="empty")], [_vi("x", [4])],
                   [_vi("y", [0])], [starts, ends])
    g = import_onnx(model)
    assert not g.nodes and g.outputs[0].is_constant and g.outputs[0].shape == (0,)


def test_a_chain_that_reads_each_value_twice_compiles_without_blowing_up():
    """Inlining x * x copies x's expression twice: forty steps would be 2**40 copies in one kernel."""
    nodes = [helper.make_node("Mul", [f"v{i}", f"v{i}"], [f"v{i + 1}"], name=f"square{i}") for i in range(40)]
    model = _model(nodes, [_vi("v0", [4, 8])], [_vi("v40", [4, 8])])
    x = np.full((4, 8), 1.0001, "float32")
    t0 = time.perf_counter()
    np.testing.assert_allclose(tilegrad.compile(model)(x), _ort(model, {"v0": x})[0], rtol=1e-4)
    assert time.perf_counter() - t0 < 60


def test_constant_gather_indices_out_of_range_are_refused():
    idx = numpy_helper.from_array(np.array([0, 5], "int64"), "idx")
    model = _model([helper.make_node("Gather", ["x", "idx"], ["y"], name="pick")], [_vi("x", [2, 3])],
                   [_vi("y", [2, 3])], [idx])
    with pytest.raises(ShapeError, match=r"'pick'.*outside \[-2, 1\]"):
        import_onnx(model)


def test_a_large_constant_computed_at_import_is_a_weight_not_a_threat():
    """VGG-style classifier weights made by ConstantOfShape (4096 x 25088 float32, 392 MiB): computed, since the
    limit is a share of the machine's memory; a limit set below them refuses them, saying how to raise it."""
    from tilegrad import config

    shape = numpy_helper.from_array(np.array([4096, 25088], "int64"), "shape")
    node = helper.make_node("ConstantOfShape", ["shape"], ["w"], name="fc_w",
                            value=numpy_helper.from_array(np.array([0.5], "float32")))
    reduce = helper.make_node("ReduceSum", ["w"], ["s"], name="sum", keepdims=0)
    add = helper.make_node("Add", ["x", "s"], ["y"], name="add")
    model = _model([node, reduce, add], [_vi("x", [1])], [_vi("y", [1])], [shape])
    import_onnx(model)
    with config.override(constant_bytes=100 << 20):
        with pytest.raises(ResourceLimitError, match=r"fc_w.*392 MiB.*more than the 100 MiB.*TILEGRAD_CONSTANT_BYTES"):
            import_onnx(model)
