"""The attention kernels' softmax form and key block: chosen by shape (passes/attention_form.py), or fixed by the
compile options `attention_form` and `attention_key_block`, with ONNX Runtime's numbers either way."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.api import compile_with_report
from tilegrad.cli import main
from tilegrad.errors import TilegradError
from tilegrad.frontend.onnx import import_onnx
from tilegrad.frontend.onnx_inputs import model_inputs, symbolic_shapes
from tilegrad.passes import optimize
from tilegrad.passes.attention_form import KEY_BLOCKS, choose_form, key_block_for, long_keys
from tilegrad.target import TARGETS, host

L2_512K = dataclasses.replace(host(), l2_bytes=512 * 1024)  # two_pass up to 512 keys, whatever this machine's L2

HEADS, HEAD = 2, 16


def bert_attention(seq: int | str, layers: int = 1) -> bytes:
    """A BERT-like encoder's attention, `layers` times: Q, K, V projections split into heads, scaled scores plus
    a padding mask (1, 1, 1, seq), softmax, the weighted values merged and projected; `seq` a number or a
    symbolic dimension."""
    rng = np.random.default_rng(0)
    width = HEADS * HEAD
    nodes, weights = [], []

    def weight(name):
        weights.append(numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32) / 4, name))
        return name

    weights.append(numpy_helper.from_array(np.array([0, 0, HEADS, HEAD], np.int64), "heads"))
    weights.append(numpy_helper.from_array(np.array([0, 0, width], np.int64), "merged"))
    weights.append(numpy_helper.from_array(np.array(HEAD ** 0.5, np.float32), "root"))
    x = "x"
    for i in range(layers):
        for part, perm in (("q", (0, 2, 1, 3)), ("k", (0, 2, 3, 1)), ("v", (0, 2, 1, 3))):
            nodes += [helper.make_node("MatMul", [x, weight(f"w{part}{i}")], [f"{part}{i}_flat"]),
                      helper.make_node("Reshape", [f"{part}{i}_flat", "heads"], [f"{part}{i}_heads"]),
                      helper.make_node("Transpose", [f"{part}{i}_heads"], [f"{part}{i}"], perm=perm)]
        nodes += [helper.make_node("MatMul", [f"q{i}", f"k{i}"], [f"scores{i}"]),
                  helper.make_node("Div", [f"scores{i}", "root"], [f"scaled{i}"]),
                  helper.make_node("Add", [f"scaled{i}", "mask"], [f"logits{i}"]),
                  helper.make_node("Softmax", [f"logits{i}"], [f"p{i}"], axis=-1),
                  helper.make_node("MatMul", [f"p{i}", f"v{i}"], [f"heads{i}"]),
                  helper.make_node("Transpose", [f"heads{i}"], [f"rows{i}"], perm=(0, 2, 1, 3)),
                  helper.make_node("Reshape", [f"rows{i}", "merged"], [f"merged{i}"]),
                  helper.make_node("MatMul", [f"merged{i}", weight(f"wo{i}")], [f"y{i}"])]
        x = f"y{i}"
    graph = helper.make_graph(nodes, "bert_attention",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, width]),
                               helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, seq])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, width])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def feeds(seq: int) -> dict[str, np.ndarray]:
    """Inputs whose mask hides the last quarter of the keys."""
    x = np.random.default_rng(1).standard_normal((1, seq, HEADS * HEAD)).astype(np.float32)
    mask = np.where(np.arange(seq) < seq - seq // 4, 0.0, -1e4).astype(np.float32).reshape(1, 1, 1, seq)
    return {"x": x, "mask": mask}


def onnxruntime(model: bytes, inputs: dict[str, np.ndarray]) -> np.ndarray:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, inputs)[0]


def forms(graph) -> list[tuple[str, int]]:
    return [(n.attrs["form"], n.attrs["key_block"]) for n in graph.nodes if n.op == "attention"]


@pytest.mark.parametrize("lk, block", [(50, 64), (64, 64), (80, 80), (197, 208), (513, 176), (600, 208),
                                       (640, 160), (1024, 256)])
def test_the_key_block_pads_the_keys_least_and_the_larger_block_wins_a_tie(lk, block):
    assert key_block_for(lk) == block
    assert block in KEY_BLOCKS and block % 16 == 0


def test_short_key_sequences_are_two_pass_and_long_ones_blockwise_relative_to_l2():
    l2 = 512 * 1024  # Zen 3's: the two-pass rows of 512 keys (16 x 2 x 2 KiB) take an eighth of it
    assert long_keys(l2) == 512 and long_keys(2 * l2) == 1024
    assert choose_form(128, 128, 64, 64, l2) == ("two_pass", 128)
    assert choose_form(1, 512, 64, 64, l2) == ("two_pass", 256)
    assert choose_form(513, 513, 64, 64, l2) == ("blockwise", 176)
    assert choose_form(513, 513, 64, 64, 2 * l2) == ("two_pass", 176)
    assert choose_form(16, 4096, 128, 64, l2) == ("blockwise", 256)


def test_the_pass_writes_the_form_and_key_block_of_each_attention_by_shape():
    short, report = optimize(import_onnx(bert_attention(80, layers=2)), target=L2_512K)
    assert forms(short) == [("two_pass", 80)] * 2
    assert [c.form for c in report.decisions["attention"].values()] == ["two_pass"] * 2
    assert "two_pass softmax (80 keys <= 512, the two-pass rows' limit for 512 KiB of L2)" in report.format()
    long, report = optimize(import_onnx(bert_attention(520)), target=L2_512K)
    assert forms(long) == [("blockwise", 176)]
    assert "blockwise softmax in blocks of 176 keys (520 keys > 512" in report.format()


def test_a_dynamic_length_takes_the_form_of_its_representative_value_not_of_its_upper_bound():
    model = bert_attention("seq")
    shapes = symbolic_shapes(model_inputs(onnx.load_from_string(model), None), {"seq": (1, 2048)})
    graph, report = optimize(import_onnx(model, input_shapes=shapes), target=L2_512K)
    assert forms(graph) == [("two_pass", 64)]  # 64 = the power of two nearest sqrt(1 * 2048)
    assert "two_pass softmax (64 keys <= 512" in report.format()


def test_on_a_gpu_target_auto_leaves_the_products_and_softmax_apart_and_an_option_still_fuses():
    gpu = TARGETS["cuda"]()  # the device's, else sm_90: no GPU needed to run the passes
    imported = import_onnx(bert_attention(520))
    unfused, report = optimize(imported, target=gpu)
    assert forms(unfused) == [] and "no schedule for a fused attention" in report.format()
    assert forms(optimize(imported, target=gpu, options={"attention_form": "blockwise"})[0]) == [("blockwise", 176)]


@pytest.mark.parametrize("form, key_block", [("two_pass", None), ("blockwise", None), ("blockwise", 48)])
def test_each_form_by_option_keeps_onnxruntimes_numbers(form, key_block):
    model, inputs = bert_attention(80, layers=2), feeds(80)
    compilation = compile_with_report(model, attention_form=form, attention_key_block=key_block)
    assert forms(compilation.graph) == [(form, key_block or 80)] * 2
    np.testing.assert_allclose(compilation.module(*inputs.values()), onnxruntime(model, inputs),
                               rtol=1e-4, atol=1e-4)


def test_a_long_sequence_in_blocks_that_pad_it_least_keeps_onnxruntimes_numbers():
    model, inputs = bert_attention(520), feeds(520)
    compilation = compile_with_report(model, attention_form="blockwise")
    assert forms(compilation.graph) == [("blockwise", 176)]
    np.testing.assert_allclose(compilation.module(*inputs.values()), onnxruntime(model, inputs),
                               rtol=1e-4, atol=1e-4)


def test_a_model_compiled_per_call_keeps_the_options():
    model, inputs = bert_attention("seq"), feeds(40)
    module = tilegrad.compile(model, attention_form="blockwise", attention_key_block=32)
    assert (module.options["attention_form"], module.options["attention_key_block"]) == ("blockwise", 32)
    np.testing.assert_allclose(module(*inputs.values()), onnxruntime(model, inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("options, named", [({"attention_form": "online"}, "attention_form"),
                                            ({"attention_key_block": 0}, "attention_key_block"),
                                            ({"attention_key_block": "64"}, "attention_key_block"),
                                            ({"attention_key_block": True}, "attention_key_block")])
def test_a_bad_option_is_an_error_naming_it_and_what_it_takes(options, named):
    model = bert_attention(16)
    takes = "'auto', 'two_pass', 'blockwise'" if named == "attention_form" else "a positive int"
    with pytest.raises(TilegradError, match=f"{named} must be .*{takes}"):
        compile_with_report(model, **options)
    with pytest.raises(TilegradError, match=named):
        tilegrad.compile(bert_attention("seq"), **options)  # compiled per call: checked before the first
    with pytest.raises(TilegradError, match=named):
        optimize(import_onnx(model), options=options)


def test_the_command_line_flag_sets_the_form(tmp_path, capsys):
    path = tmp_path / "attention.onnx"
    path.write_bytes(bert_attention(80))
    assert main(["compile", str(path), "--attention-form", "blockwise", "--explain", "-o",
                 str(tmp_path / "out")]) == 0
    assert "blockwise softmax in blocks of 80 keys (by option)" in capsys.readouterr().out
