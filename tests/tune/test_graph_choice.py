"""The graph compile(db=) builds is the one a whole-graph timing confirmed, stored under the imported graph's
digest (untuned, when the default schedules ran fastest); without a stored decision, the records' estimate
decides."""

import numpy as np
import torch
from torch import nn

from tilegrad import metrics
from tilegrad.api import compile_with_report
from tilegrad.frontend.load import import_model
from tilegrad.runtime.module import Module
from tilegrad.tune import graph_choice
from tilegrad.tune.graph_choice import UNTUNED, confirm_graph, graph_digest
from tilegrad.tune.measure import MeasureInput, MeasureResult
from tilegrad.tune.records import Database, Record
from tilegrad.tune.task import extract_tasks, kernels


class TwoConvs(nn.Module):
    def __init__(self, out: int = 24):
        super().__init__()
        self.a = nn.Conv2d(16, 16, 3, padding=1)
        self.b = nn.Conv2d(16, out, 3, padding=1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _imported(seed: int = 0, out: int = 24, size: int = 12):
    torch.manual_seed(seed)
    return import_model(TwoConvs(out).eval(), (torch.randn(1, 16, size, size),))


def test_the_digest_sees_the_structure_and_the_options_not_the_weights():
    assert graph_digest(_imported(0)) == graph_digest(_imported(1))
    assert graph_digest(_imported(0)) != graph_digest(_imported(0, out=32))
    assert graph_digest(_imported(0)) != graph_digest(_imported(0, size=14))
    assert graph_digest(_imported(0)) != graph_digest(_imported(0), opt_level=1)
    assert graph_digest(_imported(0)) == graph_digest(_imported(0), opt_level=2, disable=(), enable=())


def test_a_stored_decision_is_the_graph_compile_builds(tmp_path):
    torch.manual_seed(0)
    module, x = TwoConvs().eval(), torch.randn(1, 16, 12, 12)
    imported = import_model(module, (x,))
    convs = [n.name for n in imported.nodes if n.op == "conv"]
    db = tmp_path / "tune.db"
    with Database(db) as records:
        records.set_graph_choice(graph_digest(imported), {"choice": dict.fromkeys(convs, "im2col")})
        assert records.graph_choice(graph_digest(imported)) == {"choice": dict.fromkeys(convs, "im2col")}
        assert records.graph_choice("0" * 16) is None
    compilation = compile_with_report(module, (x,), db=db)
    ops = {n.op for node in compilation.graph.nodes for n in (node.attrs["body"].nodes if node.op == "fused"
                                                               else [node])}
    assert "im2col_conv" in ops and not ops & {"conv_nchwc", "blocked_conv"}
    np.testing.assert_allclose(compilation.module(x.numpy()), module(x).detach().numpy(), rtol=1e-3, atol=1e-4)
    plain = compile_with_report(module, (x,))
    assert [k for *_, k in kernels(plain.graph)] != [k for *_, k in kernels(compilation.graph)]


def test_a_model_that_ran_fastest_untuned_is_built_without_the_records(tmp_path):
    torch.manual_seed(0)
    module, x = TwoConvs().eval(), torch.randn(1, 16, 12, 12)
    imported = import_model(module, (x,))
    db = tmp_path / "tune.db"
    tasks = extract_tasks(compile_with_report(module, (x,)).graph)
    with Database(db) as records:
        for task in tasks:
            records.add(Record.from_measurement(MeasureInput(task, task.default_trace()), MeasureResult((1e-3,))))
    applied = {}
    for chosen in ("default", UNTUNED):
        with Database(db) as records:
            records.set_graph_choice(graph_digest(imported), {"choice": None, "chosen": chosen})
        metrics.reset()
        compilation = compile_with_report(module, (x,), db=db)
        applied[chosen] = metrics.counters["tune.records_applied"]
        np.testing.assert_allclose(compilation.module(x.numpy()), module(x).detach().numpy(), rtol=1e-3, atol=1e-4)
    assert applied == {"default": len(tasks), UNTUNED: 0} and len(tasks) > 1


def test_a_budget_s_remainder_goes_to_more_rounds_of_the_whole_graph_timing_ending_before_the_deadline(
        tmp_path, monkeypatch):
    """With a deadline the rounds go on while the next one would end before it (on a clock that ticks once a
    reading here, so the count does not depend on the machine's speed); without one, ROUNDS rounds."""
    torch.manual_seed(0)
    imported = import_model(TwoConvs().eval(), (torch.randn(1, 16, 12, 12),))
    calls = []
    real = Module.benchmark
    monkeypatch.setattr(Module, "benchmark", lambda self, **kw: calls.append(self) or real(self, **kw))
    monkeypatch.setattr(graph_choice, "MIN_REPEAT_S", 0.001)

    class Clock:  # graph_choice's `time`: one tick per reading, no sleeping
        now = 0.0

        def monotonic(self):
            self.now += 1.0
            return self.now

        def sleep(self, seconds):
            pass

    clock = Clock()
    monkeypatch.setattr(graph_choice, "time", clock)
    Database(tmp_path / "a.db").close()
    Database(tmp_path / "b.db").close()
    untuned = graph_choice.compile_untuned(imported)
    calls.clear()
    confirm_graph(imported, tmp_path / "a.db", untuned=untuned)
    assert len(calls) == graph_choice.ROUNDS * 2  # the untuned and the default graph, once a round
    calls.clear()
    deadline = clock.now + 40  # each round reads the clock twice: about 20 rounds fit
    confirm_graph(imported, tmp_path / "b.db", untuned=untuned, deadline=deadline)
    assert graph_choice.ROUNDS * 2 < len(calls) <= graph_choice.MAX_ROUNDS * 2
    assert clock.now <= deadline + 1
