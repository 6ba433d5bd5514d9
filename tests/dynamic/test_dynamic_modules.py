"""Models compiled once with dynamic dimensions (`compile(dynamic=)`): every value within the bounds runs on the
one library, matches ONNX Runtime, and compiles nothing; values outside the bounds and shapes that disagree are
errors naming the dimension."""

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tilegrad
from tilegrad import metrics
from tilegrad.errors import KernelCallError, ShapeError, TilegradError
from tilegrad.runtime.module import load

from .models import encoder_layer, exported_transformer, masked_attention, pooled_rows

BOUNDS = (1, 96)
PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89]
LENGTHS = sorted({1, 95, *PRIMES, *range(4, 97, 4)})  # the bounds, primes, multiples of 4


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    path = tmp_path_factory.mktemp("dynamic") / "encoder.onnx"
    path.write_bytes(encoder_layer().SerializeToString())
    return path, tilegrad.compile(path, dynamic={"batch": 1, "seq": BOUNDS}), ort.InferenceSession(str(path))


def test_fifty_lengths_run_on_one_library_and_match_onnx_runtime(encoder):
    _, module, session = encoder
    assert len(LENGTHS) == 50 and {1, 96, 2, 89} <= set(LENGTHS)
    rng = np.random.default_rng(0)
    built = metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"]
    for n in LENGTHS:
        x = rng.standard_normal((1, n, 32)).astype(np.float32)
        got = module(x)
        assert got.shape == (1, n, 32)
        np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4, err_msg=f"seq={n}")
    assert metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"] == built  # nothing compiled


def test_a_length_outside_the_bounds_names_the_dimension_and_the_bounds(encoder):
    _, module, _ = encoder
    with pytest.raises(KernelCallError, match=r"'seq' is 97, outside the bounds .*: 1 to 96"):
        module(np.zeros((1, 97, 32), np.float32))


def test_a_fixed_dimension_or_rank_that_disagrees_is_refused(encoder):
    _, module, _ = encoder
    with pytest.raises(KernelCallError, match=r"expects shape \(1, seq, 32\), which is \(1, 5, 32\)"):
        module(np.zeros((1, 5, 33), np.float32))
    with pytest.raises(KernelCallError, match="rank 3"):
        module(np.zeros((5, 32), np.float32))


def test_a_saved_dynamic_module_loads_and_runs_every_length(encoder, tmp_path):
    _, module, session = encoder
    module.save(tmp_path / "saved")
    loaded = load(tmp_path / "saved")
    for n in (1, 13, 96):
        x = np.random.default_rng(n).standard_normal((1, n, 32)).astype(np.float32)
        np.testing.assert_allclose(loaded(x), session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_a_reduction_and_a_softmax_over_the_dynamic_axis(tmp_path):
    path = tmp_path / "pooled.onnx"
    path.write_bytes(pooled_rows().SerializeToString())
    module = tilegrad.compile(path, dynamic={"rows": (1, 300)})
    session = ort.InferenceSession(str(path))

    @given(st.integers(1, 300))
    def check(n):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        got = module(x)
        for g, want in zip(got, session.run(None, {"x": x})):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)

    check()


def test_dynamic_names_what_the_model_lacks_or_leaves_open(tmp_path):
    path = tmp_path / "encoder.onnx"
    path.write_bytes(encoder_layer().SerializeToString())
    with pytest.raises(ShapeError, match=r"dynamic names \['len'\].*symbolic dimensions are \['batch', 'seq'\]"):
        tilegrad.compile(path, dynamic={"len": (1, 8)})
    with pytest.raises(ShapeError, match=r"named in dynamic= or fixed by input_shapes; not so: x float32\[batch"):
        tilegrad.compile(path, dynamic={"seq": (1, 8)})
    with pytest.raises(ShapeError, match=r"bounds \(4, 2\) must satisfy 1 <= lo <= hi"):
        tilegrad.compile(path, dynamic={"batch": 1, "seq": (4, 2)})
    with pytest.raises(TilegradError, match="no tuning records database at"):  # records apply (tune(dynamic=))
        tilegrad.compile(path, dynamic={"batch": 1, "seq": (1, 8)}, db=tmp_path / "tune.db")


def test_unnamed_dimensions_are_named_by_input_and_axis(tmp_path):
    """An exporter's -1 (a negative dim_value) and a dimension with neither value nor name are symbolic, as ONNX
    Runtime reads them: `dynamic=` names them `x[axis]`."""
    model = pooled_rows()
    rows = model.graph.input[0].type.tensor_type.shape.dim[0]
    rows.Clear()
    rows.dim_value = -1
    path = tmp_path / "unnamed.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ShapeError, match=r"symbolic dimensions are \['x\[0\]'\]"):
        tilegrad.compile(path, dynamic={"rows": (1, 8)})
    module = tilegrad.compile(path, dynamic={"x[0]": (1, 40)})
    session = ort.InferenceSession(str(path))
    for n in (1, 7, 40):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        for got, want in zip(module(x), session.run(None, {"x": x})):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(KernelCallError, match=r"'x\[0\]' is 41, outside the bounds"):
        module(np.zeros((41, 8), np.float32))


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_a_transformer_exported_with_a_dynamic_sequence_compiles_once(kind, tmp_path):
    """torch.export writes the sequence length's arithmetic as Shape, Gather, Concat, Range, Slice and Expand
    nodes (position ids, the causal mask's slice of its buffer): it folds into expressions of `seq`."""
    path = exported_transformer(tmp_path / f"{kind}.onnx", kind)
    module = tilegrad.compile(path, dynamic={"seq": (1, 128)})
    session = ort.InferenceSession(str(path))
    built = metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"]
    for n in (1, 2, 7, 16, 31, 64, 127, 128):
        ids = np.random.default_rng(n).integers(0, 500, (1, n))
        np.testing.assert_allclose(module(ids), session.run(None, {"ids": ids})[0], rtol=1e-4, atol=1e-4,
                                   err_msg=f"seq={n}")
    assert metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"] == built



@pytest.mark.parametrize("form", ["two_pass", "blockwise"])
def test_an_attention_over_dynamic_queries_and_keys_is_one_kernel_for_every_length(form, tmp_path):
    """The attention's query and key lengths both dynamic, a boolean mask hiding some keys and every key of one
    query: one attention kernel (after the mask's additive form) for every pair of lengths, ONNX Runtime's
    numbers."""
    path = tmp_path / "attention.onnx"
    path.write_bytes(masked_attention().SerializeToString())
    module = tilegrad.compile(path, dynamic={"seq": (1, 80), "keys": (1, 300)}, attention_form=form)
    session = ort.InferenceSession(str(path))
    rng = np.random.default_rng(0)
    built = metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"]
    for lq, lk in ((1, 1), (1, 300), (80, 1), (7, 13), (24, 24), (25, 97), (80, 300), (53, 257)):
        q, k, v = (rng.standard_normal((1, 2, n, 8)).astype(np.float32) for n in (lq, lk, lk))
        keep = rng.random((1, 1, lq, lk)) < 0.7
        keep[..., lq // 2, :] = False
        feeds = {"q": q, "k": k, "v": v, "keep": keep}
        np.testing.assert_allclose(module(q, k, v, keep), session.run(None, feeds)[0], rtol=1e-5, atol=1e-5,
                                   err_msg=f"seq={lq}, keys={lk}")
    assert metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"] == built
    labels = [site.label for site in module.profile(q, k, v, keep, repeats=1).sites]
    assert [label.split("[")[0] for label in labels] == ["where", "attention"], labels


def test_a_profile_counts_the_work_of_the_call_not_of_the_largest_one(encoder):
    """Each kernel's FLOPs and bytes are formulas of the dimensions, evaluated at the profiled call's values: at
    the bounds' largest the rates would be 9.6x too high at seq 10 (and a kernel above the FMA peak re-measures
    the machine)."""
    _, module, _ = encoder
    work = {}
    for n in (10, 96):
        profile = module.profile(np.zeros((1, n, 32), np.float32), repeats=2, warmup=1)
        work[n] = sum(r.flops for r in profile.sites), sum(r.bytes for r in profile.sites)
    largest = {d.key: d.hi for d in module.spec.dims}
    assert work[96] == (sum(k.at(largest).flops for k in module.spec.kernels),
                        sum(k.at(largest).bytes for k in module.spec.kernels))
    assert 9 * work[10][0] < work[96][0] and work[10][1] < work[96][1]


def test_the_cli_compiles_with_dynamic_dimensions_and_runs_any_length(tmp_path, capsys):
    from tilegrad.cli import main

    path = tmp_path / "encoder.onnx"
    path.write_bytes(encoder_layer().SerializeToString())
    out = tmp_path / "module"
    assert main(["compile", str(path), "-o", str(out), "--dynamic", "batch=1", "--dynamic", "seq=1:64"]) == 0
    report = capsys.readouterr().out
    assert "inputs     1: x float32[1, seq, 32]" in report and "dynamic    seq in 1..64" in report
    x = np.random.default_rng(0).standard_normal((1, 7, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(out), "--input", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "y.npz")]) == 0
    with np.load(tmp_path / "y.npz") as saved:
        np.testing.assert_allclose(saved["y"], ort.InferenceSession(str(path)).run(None, {"x": x})[0], rtol=1e-4,
                                   atol=1e-4)
    assert main(["compile", str(path), "-o", str(out), "--dynamic", "seq=1-64"]) != 0
    assert "is not NAME=LO:HI" in capsys.readouterr().err
