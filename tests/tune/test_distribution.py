"""Tuning for a distribution of dynamic dimensions: sample points, nodes specialised at them with the same
computation as the symbolic kernel's specialisation, and `tune(dynamic=)` end to end: every dynamic kernel gets
the schedule with the least mean latency over the points found, recorded under its symbolic key, which
`compile(dynamic=, db=)` replays (against ONNX Runtime at lengths tuned and not)."""

from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad import metrics
from tilegrad.errors import TilegradError
from tilegrad.frontend.load import import_model
from tilegrad.frontend.onnx_inputs import model_inputs, symbolic_shapes
from tilegrad.ir.compute import node_compute
from tilegrad.ir.specialize import specialize_node
from tilegrad.passes import optimize
from tilegrad.te.specialize import specialize
from tilegrad.tune.distribution import kernels_of, sample_points, sample_values
from tilegrad.tune.graph_choice import graph_digest
from tilegrad.runtime import module as module_runtime
from tilegrad.tune.records import Database
from tilegrad.tune.autotvm.annealing import AnnealingOptions
from tilegrad.tune.autotvm.policy import AutoTVMPolicy
from tilegrad.tune.search.evolutionary import EvolutionaryPolicy
from tilegrad.tune.task import workload_key

SMALL = EvolutionaryPolicy(population=24, generations=1, measure_per_round=4)
AUTOTVM = AutoTVMPolicy(measure_per_round=4, warmup=4, plan_size=16, annealing=AnnealingOptions(chains=4, steps=6))


def _rows_model():
    """x[1, seq, 32] -> (x @ w1 + b1) -> GELU-free ReLU -> @ w2 -> a row softmax: products and a reduction whose
    rows are the dynamic length."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.2, n)
             for n, s in (("w1", (32, 48)), ("b1", (48,)), ("w2", (48, 16)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _graph(model, bounds):
    return optimize(import_model(model, None, symbolic_shapes(model_inputs(model, None), bounds)), 2)[0]


def test_sample_values_spread_over_the_bounds_in_log_scale():
    assert sample_values(1, 512) == [3, 23, 181]
    assert sample_values(16, 16) == [16]
    assert sample_values(1, 2) == [1, 2]
    assert all(16 <= v <= 512 for v in sample_values(16, 512, 5))


def test_sample_points_take_named_values_or_the_default_and_refuse_others():
    graph = _graph(_rows_model(), {"seq": (1, 64)})
    assert [list(p.values()) for p in sample_points(graph)] == [[v] for v in sample_values(1, 64)]
    assert [list(p.values()) for p in sample_points(graph, {"seq": [48, 8]})] == [[8], [48]]
    with pytest.raises(TilegradError, match="not dynamic dimensions"):
        sample_points(graph, {"batch": [2]})
    with pytest.raises(TilegradError, match="within its bounds 1 to 64"):
        sample_points(graph, {"seq": [65]})


def test_a_node_specialised_at_a_point_computes_the_symbolic_kernels_specialisation():
    graph = _graph(_rows_model(), {"seq": (1, 64)})
    kernels = [k for k in kernels_of(graph, [{"dyn_seq": 7}]) if k.dynamic]
    assert kernels
    for k in kernels:
        outputs = node_compute(k.task.node)[1]
        made = specialize(outputs, {"dyn_seq": 7})
        assert k.at_points[0].key == workload_key([made[t] for t in outputs]), k.task.name
        assert workload_key(node_compute(specialize_node(k.task.node, {"dyn_seq": 7}))[1]) == k.at_points[0].key


@pytest.mark.parametrize("policy", [SMALL, AUTOTVM], ids=["sketches, one task over the points", "autotvm, per point"])
def test_tuning_for_a_distribution_records_each_dynamic_kernel_and_compile_replays_it(tmp_path, policy):
    model = _rows_model()
    db = tmp_path / "tune.db"
    result = tilegrad.tune(model, db=db, dynamic={"seq": (1, 64)}, samples={"seq": [4, 24]}, policy=policy,
                           trials=16, confirm=0, recheck=0, progress=False)
    assert result.points == 2 and result.distribution
    graph = _graph(model, {"seq": (1, 64)})
    dynamic = {k.task.key for k in kernels_of(graph, [{"dyn_seq": 4}]) if k.dynamic}
    assert set(result.distribution) == dynamic  # every dynamic kernel got a schedule for the distribution
    with Database(db) as records:
        for key, mean in result.distribution.items():
            best = records.best(key)
            assert best.latency == pytest.approx(mean)
            # a sketch policy times each candidate at every point under the kernel's own key; AutoTVM's templates
            # tune the points apart, and the choice among their best is recorded after
            assert (best.origin == "distribution") == (policy is AUTOTVM)
    # the module was timed whole at the points with the records and without, and compile follows the faster
    assert set(result.graph.seconds) == {"untuned", "tuned"}
    _check_replayed(model, db, len(dynamic) if result.graph.chosen == "tuned" else 0)


def test_compile_replays_a_distributions_records_only_where_the_module_timed_faster_with_them(tmp_path):
    """The decision `confirm_dynamic` stores under the imported graph's digest: "untuned" leaves compile(dynamic=,
    db=) building the module without the records, "tuned" replays them."""
    model = _rows_model()
    db = tmp_path / "tune.db"
    tilegrad.tune(model, db=db, dynamic={"seq": (1, 64)}, samples={"seq": [4, 24]}, policy=SMALL, trials=8,
                  confirm=0, recheck=0, progress=False)
    imported = import_model(model, None, symbolic_shapes(model_inputs(model, None), {"seq": (1, 64)}))
    dynamic = sum(k.dynamic for k in kernels_of(_graph(model, {"seq": (1, 64)}), [{"dyn_seq": 4}]))
    for chosen, applied in (("untuned", 0), ("tuned", dynamic)):
        with Database(db) as records:
            records.set_graph_choice(graph_digest(imported, opt_level=2), {"choice": None, "chosen": chosen})
        _check_replayed(model, db, applied)


def test_a_dynamic_module_benchmarks_at_the_values_it_is_given(monkeypatch):
    """The inputs it times are of the dimensions' given values (by the model's name or the key), else the
    largest."""
    module = tilegrad.compile(_rows_model(), dynamic={"seq": (1, 64)})
    timed = []
    monkeypatch.setattr(module_runtime, "time_kernel",
                        lambda kernel, arrays, **_: timed.append(arrays[0].shape) or SimpleNamespace(median=0.0))
    key = module.spec.dims[0].key
    for dims in ({"seq": 5}, {key: 7}, None):
        module.benchmark(dims=dims)
    assert timed == [(1, 5, 32), (1, 7, 32), (1, 64, 32)]


def _check_replayed(model, db, dynamic_kernels: int):
    before = metrics.counters["tune.records_applied"]
    module = tilegrad.compile(model, dynamic={"seq": (1, 64)}, db=db)
    assert metrics.counters["tune.records_applied"] - before == dynamic_kernels
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for seq in (1, 4, 13, 24, 64):
        x = np.random.default_rng(seq).standard_normal((1, seq, 32)).astype(np.float32)
        np.testing.assert_allclose(module(x), session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_samples_without_dynamic_are_refused(tmp_path):
    with pytest.raises(TilegradError, match="give their bounds with dynamic="):
        tilegrad.tune(_rows_model(), db=tmp_path / "t.db", samples={"seq": [4]}, trials=1)


def test_the_cli_tunes_for_a_distribution_and_compiles_with_the_records(tmp_path, capsys):
    from tilegrad.cli import main

    path = tmp_path / "rows.onnx"
    path.write_bytes(_rows_model().SerializeToString())
    db = tmp_path / "tune.db"
    assert main(["tune", str(path), "--db", str(db), "--dynamic", "seq=1:64", "--sample", "seq=8,32", "--trials",
                 "8", "--policy", "evolutionary"]) == 0
    out = capsys.readouterr().out
    assert "dynamic kernels scheduled for their mean over 2 points" in out and "--dynamic seq=1:64" in out
    assert main(["compile", str(path), "--db", str(db), "--dynamic", "seq=1:64", "-o", str(tmp_path / "m")]) == 0
    assert main(["tune", str(path), "--db", str(db), "--sample", "seq=8", "--trials", "1"]) == 2
    assert "--sample picks values" in capsys.readouterr().err
