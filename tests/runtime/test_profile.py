"""Module.profile: one row per kernel call site of the compiled entry, each with its median time, its share, the
FLOPs and bytes recorded at compile time and its rates against the machine's peaks; the profiled run computes
what the plain one does."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.errors import ModuleFormatError
from tilegrad.machine import MachinePeaks
from tilegrad.runtime.module import ModuleSpec
from tilegrad.tune.model import model_tasks

PEAKS = MachinePeaks("Test CPU", "avx2+fma", 2, 100.0, 10.0)  # fixed, so no test waits for a measurement
RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)  # conv: 3 -> 4 channels, 3x3, pads 1
B = RNG.standard_normal(4).astype(np.float32)
M = RNG.standard_normal((256, 10)).astype(np.float32)  # matmul on the flattened (2, 4 * 8 * 8) features


def _convnet(batch: int | str = 2) -> onnx.ModelProto:
    """x (batch, 3, 8, 8) -> Conv(pads 1) -> Relu -> Reshape(batch, 256) -> MatMul -> y (batch, 10)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv_0", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu_0"),
             helper.make_node("Reshape", ["r", "shape"], ["f"], name="flatten_0"),
             helper.make_node("MatMul", ["f", "m"], ["y"], name="matmul_0")]
    inits = [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b"), numpy_helper.from_array(M, "m"),
             numpy_helper.from_array(np.array([-1, 256], np.int64), "shape")]
    graph = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                [batch, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def _reference(x):
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    c = np.einsum("nchwij,ocij->nohw", windows, W) + B[:, None, None]
    return np.maximum(c, 0).reshape(len(x), 256) @ M


def test_each_kernel_has_a_row_with_its_time_share_flops_and_bytes():
    mod = tilegrad.compile(_convnet(), opt_level=0)  # one kernel per op; the reshape is a view
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    profile = mod.profile(x, repeats=5, warmup=1, peaks=PEAKS)
    assert [r.label for r in profile.sites] == ["conv[2x4x8x8 r27]", "relu[2x4x8x8]", "matmul[2x10 r256]"]
    assert [r.function for r in profile.sites] == [k.function for k in mod.spec.kernels]
    conv, relu, matmul = profile.sites
    assert conv.flops == 2 * 4 * 8 * 8 * (3 * 3 * 3 * 2 + 1)  # a multiply-add per tap, then the bias
    assert relu.flops == 2 * 4 * 8 * 8
    assert matmul.flops == 2 * 10 * 256 * 2
    assert conv.bytes == 4 * (x.size + W.size + B.size + 2 * 4 * 8 * 8)
    assert matmul.bytes == 4 * (2 * 256 + M.size + 2 * 10)
    assert all(r.seconds > 0 and r.calls == 1 for r in profile.sites)
    between = profile.profiled_s - profile.kernels_s  # the entry's own time: barriers, output copies, clocks
    assert between >= 0 and sum(r.share for r in profile.sites) + between / profile.profiled_s == pytest.approx(1.0)
    assert conv.gflops == pytest.approx(conv.flops / conv.seconds / 1e9)
    assert conv.fma_fraction == pytest.approx(conv.gflops / 100.0)
    assert matmul.bandwidth_fraction == pytest.approx(matmul.bytes / matmul.seconds / 1e9 / 10.0)
    assert profile.latency_s > 0 and profile.profiled_s > 0 and profile.peaks == PEAKS
    np.testing.assert_array_equal(profile.outputs[0], mod(x))
    np.testing.assert_allclose(profile.outputs[0], _reference(x), rtol=1e-4, atol=1e-4)


def test_labels_and_flops_are_those_of_the_tuning_tasks():
    model = _convnet()
    mod = tilegrad.compile(model)
    tasks = [t for t in model_tasks(model) if t.algorithm is None]  # the kernels compile builds
    assert [(k.label, k.flops) for k in mod.spec.kernels] == [(t.name, t.flops) for t in tasks]


def test_sites_of_one_label_add_up_in_the_view_by_label():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu_0"), helper.make_node("Exp", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"], name="relu_1")]
    model = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [64, 64])],
                                                [helper.make_tensor_value_info("y", 1, [64, 64])]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    mod = tilegrad.compile(model, opt_level=0)
    profile = mod.profile(RNG.standard_normal((64, 64)).astype(np.float32), repeats=3, peaks=PEAKS)
    by_label = {r.label: r for r in profile.by_label()}
    assert set(by_label) == {"relu[64x64]", "exp[64x64]"}
    relus = [r for r in profile.sites if r.label == "relu[64x64]"]
    assert by_label["relu[64x64]"].calls == 2
    assert by_label["relu[64x64]"].seconds == pytest.approx(sum(r.seconds for r in relus))
    assert by_label["relu[64x64]"].flops == sum(r.flops for r in relus)
    assert [r.seconds for r in profile.by_label()] == sorted((r.seconds for r in profile.by_label()), reverse=True)


def test_the_table_and_json_name_the_machine_and_every_kernel():
    mod = tilegrad.compile(_convnet(), opt_level=0)
    profile = mod.profile(x=RNG.standard_normal((2, 3, 8, 8)).astype(np.float32), repeats=3, peaks=PEAKS)
    table = profile.table()
    assert "Test CPU, avx2+fma, 2 threads; FMA peak 100.0 GFLOP/s, bandwidth 10.0 GB/s" in table
    assert "un-instrumented" in table and "= kernels" in table and "between them" in table
    for r in profile.sites:
        assert r.label in table and r.function in table
    assert "(2 more kernels" in profile.table(top=1)
    data = json.loads(json.dumps(profile.to_json()))
    assert [k["label"] for k in data["kernels"]] == [r.label for r in profile.sites]
    assert data["machine"]["fma_gflops"] == 100.0 and data["kernels_s"] == pytest.approx(profile.kernels_s)


def test_a_saved_module_profiles_as_it_did_before_saving(tmp_path):
    mod = tilegrad.compile(_convnet())
    loaded = tilegrad.load(mod.save(tmp_path / "convnet"))
    assert loaded.spec.kernels == mod.spec.kernels
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    profile = loaded.profile(x, repeats=3, peaks=PEAKS)
    assert [r.label for r in profile.sites] == [k.label for k in mod.spec.kernels]
    np.testing.assert_array_equal(profile.outputs[0], mod(x))


def test_a_spec_without_call_sites_reads_but_does_not_profile():
    mod = tilegrad.compile(_convnet())
    old = {k: v for k, v in mod.spec.to_json().items() if k != "kernels"}  # as saved before profiling
    assert ModuleSpec.from_json(old).kernels == ()
    mod.spec = ModuleSpec.from_json(old)
    with pytest.raises(ModuleFormatError, match="records no kernel call sites.*compile it again"):
        mod.profile(np.zeros((2, 3, 8, 8), np.float32), peaks=PEAKS)


def test_a_specializing_module_profiles_the_specialisation_it_runs():
    mod = tilegrad.compile(_convnet("N"))
    x = RNG.standard_normal((3, 3, 8, 8)).astype(np.float32)
    profile = mod.profile(x, repeats=3, peaks=PEAKS)
    assert profile.sites[0].label.endswith("[3x4x8x8 r27]")
    np.testing.assert_allclose(profile.outputs[0], _reference(x), rtol=1e-4, atol=1e-4)


def test_a_bad_repeat_count_is_refused():
    mod = tilegrad.compile(_convnet(), opt_level=0)
    with pytest.raises(ValueError, match="repeats >= 1"):
        mod.profile(np.zeros((2, 3, 8, 8), np.float32), repeats=0, peaks=PEAKS)


@pytest.mark.parametrize("kernels, message", [
    ("x", "'kernels' is not a list"),
    ([{"function": "k0_relu", "label": "relu[4]", "flops": "many", "bytes": 32}], "lacks a function, a label, flops"),
    ([{"label": "relu[4]", "flops": 4, "bytes": 32}], "lacks a function"),
])
def test_a_spec_with_bad_call_sites_is_refused(kernels, message):
    spec = {"inputs": [], "outputs": [], "weights": [], "workspace_bytes": 0, "unshared_bytes": 0,
            "kernels": kernels}
    with pytest.raises(ModuleFormatError, match=message):
        ModuleSpec.from_json(spec)


def test_a_kernel_above_the_cached_peak_has_it_measured_again_and_never_reads_above_the_ceiling(monkeypatch):
    from tilegrad.runtime import profile as profiling

    low, measured = MachinePeaks("Test CPU", "avx2+fma", 2, 1e-6, 10.0), []

    def fake_peaks(threads, remeasure=False):
        measured.append(remeasure)
        return low
    monkeypatch.setattr(profiling, "measured_peaks", fake_peaks)
    mod = tilegrad.compile(_convnet(), opt_level=0)
    profile = mod.profile(RNG.standard_normal((2, 3, 8, 8)).astype(np.float32), repeats=3)
    assert measured == [False, True]  # the cached peak, then measured again
    assert max(r.fma_fraction for r in profile.sites) <= profiling.CEILING_SLACK
    assert "a kernel's rate" in profile.peaks.how


def test_long_labels_and_names_are_shortened_between_whole_words():
    from tilegrad.runtime.profile import fit_label, fit_name

    label = "panel_matmul+mul+erf+add+mul+add+reshape+transpose[1x12x128x64 r768]"
    short = fit_label(label, 44)
    assert short == "panel_matmul+…+transpose[1x12x128x64 r768]" and len(short) <= 44
    assert all(op in label.split("[")[0].split("+") for op in short.split("[")[0].split("+") if op != "…")
    assert fit_label("relu[2x4]", 44) == "relu[2x4]"
    assert fit_name("k012_fused_panel_matmul_mul_erf_add", 20) == "k012_fuse…ul_erf_add" and len(fit_name("x" * 40, 20)) == 20


def test_products_of_one_output_shape_are_told_apart_by_their_reductions():
    import torch

    from tilegrad.tune.model import model_graph
    from tilegrad.tune.task import extract_tasks

    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(32, 16), torch.nn.Linear(64, 16)

        def forward(self, x, y):
            return self.a(x) + 1, self.b(y) + 1

    tasks = extract_tasks(model_graph(Two(), example_inputs=(torch.randn(8, 32), torch.randn(8, 64))))
    assert sorted(t.name.split("[")[1] for t in tasks) == ["8x16 r32]", "8x16 r64]"]
