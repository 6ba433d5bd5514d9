"""Pipeline parallelism: the schedules' orders, the split into stages, and GPipe and 1F1B on 2 and 4 gloo processes
giving the single-process loss and gradients, with 1F1B holding fewer activations at its peak."""

from itertools import pairwise

import pytest
import torch
from torch import nn

from tilegrad.errors import TilegradError
from tilegrad.parallel.launch import run_workers
from tilegrad.parallel.pipeline import PipelineStage, split_stages
from tilegrad.parallel.schedules import gpipe, one_f_one_b, peak_in_flight, schedule_for

SCHEDULES = ("gpipe", "1f1b")


def _order(actions):
    return " ".join(map(str, actions))


def test_gpipe_runs_all_forwards_then_all_backwards():
    assert _order(gpipe(4, 4, 2)) == "F0 F1 F2 F3 B0 B1 B2 B3"


def test_1f1b_warms_up_alternates_and_cools_down_by_stage():
    assert _order(one_f_one_b(4, 8, 0)) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7"
    assert _order(one_f_one_b(4, 8, 2)) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7"
    assert _order(one_f_one_b(4, 8, 3)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"
    assert _order(one_f_one_b(4, 2, 0)) == "F0 F1 B0 B1"  # fewer micro-batches than warm-up steps


@pytest.mark.parametrize("stages,micro", [(2, 4), (4, 8), (4, 3), (1, 5)])
def test_every_schedule_runs_each_micro_batch_forward_before_backward_once(stages, micro):
    for name in SCHEDULES:
        for s in range(stages):
            actions = schedule_for(name, stages, micro, s)
            expected = [f"F{m}" for m in range(micro)] + [f"B{m}" for m in range(micro)]
            assert sorted(map(str, actions)) == sorted(expected)
            done = set()
            for a in actions:
                assert a.kind == "F" or f"F{a.micro}" in done
                done.add(str(a))


def test_1f1b_holds_at_most_stages_minus_stage_micro_batches():
    assert [peak_in_flight(gpipe(4, 8, s)) for s in range(4)] == [8, 8, 8, 8]
    assert [peak_in_flight(one_f_one_b(4, 8, s)) for s in range(4)] == [4, 3, 2, 1]


def test_unknown_schedule_and_bad_sizes_are_errors():
    with pytest.raises(TilegradError, match="'zigzag' is unknown.*1f1b"):
        schedule_for("zigzag", 2, 2, 0)
    with pytest.raises(TilegradError, match="stage=2"):
        gpipe(2, 4, 2)


class _Residual(nn.Module):
    """A model fx captures as a graph, with a skip connection inside the first stage."""

    def __init__(self):
        super().__init__()
        self.inp, self.mid, self.head = nn.Linear(6, 12), nn.Linear(12, 12), nn.Linear(12, 3)

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        h = h + torch.tanh(self.mid(h))
        return self.head(h)


def _sequential():
    torch.manual_seed(0)
    sizes = [6, 16, 16, 16, 3]
    layers = []
    for a, b in pairwise(sizes):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers)  # 8 layers


def _model(kind):
    if kind == "fx":
        torch.manual_seed(0)
        return torch.fx.symbolic_trace(_Residual())
    return _sequential()


ASSIGNMENT = {"fx": {"inp": 0, "mid": 0, "head": 1}, "seq4": [0, 0, 1, 1, 2, 2, 3, 3]}


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(16, 6, generator=g), torch.randn(16, 3, generator=g)


def _pipeline_worker(rank, world_size, kind, num_micro):
    model = _model(kind)
    stage = PipelineStage(split_stages(model, ASSIGNMENT[kind])[rank], rank, world_size)
    x, t = _batch()
    out = {}
    for name in SCHEDULES:
        model.zero_grad(set_to_none=True)
        loss = stage.train_step(x if rank == 0 else None, t if rank == world_size - 1 else None,
                                loss_fn=nn.functional.mse_loss, num_micro=num_micro, schedule=name)
        grads = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
        out[name] = (None if loss is None else loss.item(), grads, stage.last_stats)
    return out  # NumPy, not tensors: a tensor crosses the result queue by shared memory its exiting sender frees


def _reference(kind):
    model = _model(kind)
    x, t = _batch()
    loss = nn.functional.mse_loss(model(x), t)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}


def _check_against_single_process(results, kind):
    ref_loss, ref_grads = _reference(kind)
    for name in SCHEDULES:
        assert results[-1][name][0] == pytest.approx(ref_loss.item(), abs=1e-5, rel=1e-5)
        assert all(r[name][0] is None for r in results[:-1])
        grads = {}
        for r in results:
            assert not grads.keys() & r[name][1].keys(), "a parameter has gradients on two stages"
            grads.update(r[name][1])
        assert grads.keys() == ref_grads.keys()
        for n, grad in grads.items():
            torch.testing.assert_close(torch.from_numpy(grad), ref_grads[n], atol=1e-5, rtol=1e-5, msg=f"{name}: {n}")


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")  # one torch.distributed launch at a time under xdist
def test_two_stage_fx_pipeline_matches_single_process():
    _check_against_single_process(run_workers(_pipeline_worker, 2, "fx", 4, timeout_s=120), "fx")


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")  # one torch.distributed launch at a time under xdist
def test_four_stage_pipeline_matches_single_process_and_1f1b_holds_less():
    results = run_workers(_pipeline_worker, 4, "seq4", 8, timeout_s=120)
    _check_against_single_process(results, "seq4")
    gpipe_stats = [r["gpipe"][2] for r in results]
    ofob_stats = [r["1f1b"][2] for r in results]
    assert [s.peak_in_flight for s in gpipe_stats] == [8, 8, 8, 8]
    assert [s.peak_in_flight for s in ofob_stats] == [4, 3, 2, 1]
    for g, o in zip(gpipe_stats, ofob_stats):
        assert 0 < o.peak_bytes < g.peak_bytes
    # Each micro-batch holds the same bytes on a stage, so the bytes scale with the micro-batches held.
    assert ofob_stats[0].peak_bytes * 2 == gpipe_stats[0].peak_bytes


class _LongSkip(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        a = self.a(x)
        return self.c(self.b(a)) + a


def test_split_rejects_a_cut_across_a_skip_connection_and_bad_assignments():
    assert len(split_stages(torch.fx.symbolic_trace(_LongSkip()), {"a": 0, "b": 1, "c": 1})) == 2
    with pytest.raises(TilegradError, match="takes 2 inputs.*one tensor"):
        split_stages(torch.fx.symbolic_trace(_LongSkip()), {"a": 0, "b": 1, "c": 2})
    with pytest.raises(TilegradError, match="no stage"):
        split_stages(_model("fx"), {"inp": 0, "head": 1})
    with pytest.raises(TilegradError, match="rise by at most 1"):
        split_stages(_sequential(), [0, 0, 2, 2, 2, 2, 3, 3])
    with pytest.raises(TilegradError, match="8 layers but 2"):
        split_stages(_sequential(), [0, 1])


def test_split_stages_share_the_model_parameters():
    model = _model("fx")
    stages = split_stages(model, ASSIGNMENT["fx"])
    shared = {id(p) for s in stages for p in s.parameters()}
    assert shared == {id(p) for p in model.parameters()}
    x, _ = _batch()
    torch.testing.assert_close(stages[1](stages[0](x)), model(x), rtol=0, atol=0)
