"""Convolution algorithms and layout blocks as a tuning choice: each other algorithm, and each other block of the
direct convolution ("direct@16"), gives a variant graph whose kernels become tasks, the records pick the fastest
whole graph (a mix of per-convolution winners included), and compile(db=) builds it with unchanged outputs."""

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import tilegrad
from tilegrad.api import compile_with_report
from tilegrad.cli import main
from tilegrad.frontend.load import import_model
from tilegrad.passes.conv_algorithm import ALGORITHMS
from tilegrad.passes.layout import block_sizes
from tilegrad.target import host
from tilegrad.tune.algorithms import MIXED, algorithm_tasks, choose, variants
from tilegrad.tune.apply import BestRecords
from tilegrad.tune.callbacks import default_callbacks
from tilegrad.tune.graph_choice import UNTUNED
from tilegrad.tune.model import model_tasks
from tilegrad.tune.search.evolutionary import EvolutionaryPolicy
from tilegrad.tune.task import kernels
from tilegrad.tune.tuner import tune_tasks
from tilegrad.tune.tuning_run import TuneOptions

KERNEL_OF = {"blocked_conv": "direct", "conv_nchwc": "direct", "im2col_conv": "im2col"}
DEFAULT_BLOCK, WIDE_BLOCK = block_sizes(host())
WIDE = f"direct@{WIDE_BLOCK}"  # the block variant's label


class TwoConvs(nn.Module):
    """Two 3 x 3 convolutions of different shapes, so that each has its own kernels."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(16, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 24, 3, padding=1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _imported():
    torch.manual_seed(0)
    return import_model(TwoConvs().eval(), (torch.randn(1, 16, 12, 12),))


def _algorithms_in(variant) -> dict[str, str]:
    """Conv node name -> the algorithm of the kernel that runs it, read off the optimised graph's ops."""
    out = {}
    for node in variant.graph.nodes:
        for n in node.attrs["body"].nodes if node.op == "fused" else [node]:
            if n.op in ("winograd_conv", "winograd_conv_nchwc"):
                out[variant.runs[n.name]] = f"winograd{n.attrs['m']}"
            elif n.op == "conv_nchwc" and n.outputs[0].shape[-1] != DEFAULT_BLOCK:
                out[variant.runs[n.name]] = f"direct@{n.outputs[0].shape[-1]}"
            elif n.op in KERNEL_OF:
                out[variant.runs[n.name]] = KERNEL_OF[n.op]
    return out


def test_each_other_algorithm_gives_a_variant_graph_that_uses_it_wherever_it_applies():
    vs = variants(_imported())
    default, others = vs[0], vs[1:]
    assert default.algorithm is None and len(default.choice) == 2
    assert _algorithms_in(default) == default.choice
    assert {v.algorithm for v in others} == set(ALGORITHMS) - set(default.choice.values()) | {WIDE}
    for v in others:
        assert set(v.choice.values()) == {v.algorithm}  # a 3 x 3 stride-1 convolution takes all four
        assert _algorithms_in(v) == v.choice


def test_the_variants_kernels_become_tasks_labelled_with_their_algorithm():
    vs = variants(_imported())
    tasks = algorithm_tasks(vs)
    default_keys = {key for _, _, key in kernels(vs[0].graph)}
    assert {t.key for t in tasks if t.algorithm is None} == default_keys
    assert {t.algorithm for t in tasks} - {None} == {v.algorithm for v in vs[1:]}
    assert len({t.key for t in tasks}) == len(tasks)
    for v in vs[1:]:
        keys = {key for _, _, key in kernels(v.graph)}
        assert keys <= {t.key for t in tasks}
    torch.manual_seed(0)
    listed = model_tasks(TwoConvs().eval(), example_inputs=(torch.randn(1, 16, 12, 12),))
    assert [t.key for t in listed] == [t.key for t in tasks]
    alone = model_tasks(TwoConvs().eval(), example_inputs=(torch.randn(1, 16, 12, 12),), algorithms=False)
    assert [t.key for t in alone] == sorted(default_keys, key=[t.key for t in tasks].index)


def test_list_tasks_shows_the_block_variants_tasks_with_their_label(tmp_path, capsys):
    torch.manual_seed(0)
    path = tmp_path / "two_convs.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(TwoConvs().eval(), (torch.randn(1, 16, 12, 12),), str(path), dynamo=False)
    assert main(["tune", str(path), "--list-tasks"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    wide = [row for row in rows if WIDE in row]
    assert len(wide) == len([t for t in model_tasks(str(path)) if t.algorithm == WIDE]) > 0
    assert any(row[1].startswith("conv_nchwc") for row in wide)

def _records(vs, fast: dict[str, str], missing: str | None = None, unknown: float | None = 1e-5, fair=None):
    """Latencies by task key: a conv's kernels 1 ms, but 0.1 ms under its algorithm in `fast` (0.5 ms in `fair`),
    other kernels 0.01 ms; no record for the kernels of algorithm `missing`; `unknown` for kernels of no
    variant."""
    table = {}
    for v in vs:
        for node, _, key in kernels(v.graph):
            convs = {v.runs[n] for n in _members(node) & set(v.runs)}
            if not convs:
                table[key] = 1e-5
            elif missing in {v.choice[c] for c in convs}:
                table[key] = None
            elif all(fast.get(c) == v.choice[c] for c in convs):
                table[key] = 1e-4
            else:
                table[key] = 5e-4 if all((fair or {}).get(c) == v.choice[c] for c in convs) else 1e-3
    return lambda key: table.get(key, unknown)


def _members(node) -> set[str]:
    return {n.name for n in (node.attrs["body"].nodes if node.op == "fused" else [node])}


def test_the_records_choose_each_convolutions_fastest_algorithm_as_one_graph():
    imported = _imported()
    vs = variants(imported)
    a, b = sorted(vs[0].choice)
    chosen = choose(imported, _records(vs, {a: "im2col", b: "direct"}))
    assert chosen.algorithm == MIXED
    assert chosen.choice == {a: "im2col", b: "direct"} == _algorithms_in(chosen)


def test_the_records_choose_the_wider_block_where_its_kernels_are_faster_and_the_default_otherwise():
    imported = _imported()
    vs = variants(imported)
    both = dict.fromkeys(vs[0].choice, WIDE)
    chosen = choose(imported, _records(vs, both))
    assert chosen.algorithm == WIDE and chosen.choice == both == _algorithms_in(chosen)
    blocks = {n.outputs[0].shape[-1] for n in chosen.graph.nodes for m in _members_of(n) if m.op == "conv_nchwc"}
    assert blocks == {WIDE_BLOCK}
    narrow = dict.fromkeys(vs[0].choice, "direct")
    assert choose(imported, _records(vs, narrow)).choice == narrow
    assert choose(imported, _records(vs, vs[0].choice)).choice == vs[0].choice


def test_a_mix_of_blocks_is_costed_with_its_own_kernels_and_loses_where_one_was_never_timed():
    """Conv a fastest at the wide block, conv b at the default one: the mix reads a's wide blocks into b, a
    kernel no candidate had; with no record for it, the mix loses, and with one it wins."""
    imported = _imported()
    vs = variants(imported)
    a, b = sorted(vs[0].choice)
    fast = {a: WIDE, b: "direct"}
    chosen = choose(imported, _records(vs, fast, unknown=None))
    assert chosen.choice != fast
    chosen = choose(imported, _records(vs, fast, unknown=1e-5))
    assert chosen.algorithm == MIXED and chosen.choice == fast == _algorithms_in(chosen)


def _members_of(node):
    return node.attrs["body"].nodes if node.op == "fused" else [node]


def test_a_mix_of_direct_and_winograd_stays_blocked_and_every_kernel_of_it_was_timed():
    """Winograd runs in the blocked layout too, so a direct a feeding a Winograd b needs no transform: each of its
    kernels is one of the variants' (a from the direct graph, b reading blocks from the all-Winograd one), and the
    records choose the mix even where they know no other kernel."""
    imported = _imported()
    vs = variants(imported)
    a, b = sorted(vs[0].choice)
    other = next(alg for alg in ("winograd2", "winograd4") if alg != vs[0].choice[b])
    records = _records(vs, {a: "direct", b: other}, unknown=None, fair={a: vs[0].choice[a]})
    chosen = choose(imported, records)
    assert chosen.algorithm == MIXED and chosen.choice == {a: "direct", b: other} == _algorithms_in(chosen)
    assert not [n for n in chosen.graph.nodes for m in _members_of(n) if m.op.startswith("layout_")][1:]


def test_a_graph_with_a_kernel_never_timed_loses_and_no_records_keep_the_default():
    imported = _imported()
    vs = variants(imported)
    both = dict.fromkeys(vs[0].choice, "im2col")
    assert choose(imported, _records(vs, both, missing="im2col")).choice == vs[0].choice
    assert choose(imported, lambda key: None).choice == vs[0].choice
    assert choose(imported, _records(vs, both)).choice == both


def test_tuning_every_algorithm_then_compiling_keeps_the_outputs(tmp_path):
    torch.manual_seed(0)
    module, x = TwoConvs().eval(), torch.randn(1, 16, 12, 12)
    db = tmp_path / "tune.db"
    policy = EvolutionaryPolicy(population=32, generations=1, measure_per_round=2)
    result = tilegrad.tune(module, example_inputs=(x,), db=db, policy=policy, trials=8, progress=False, confirm=0)
    assert any(r.task.algorithm for r in result.tasks)
    assert result.graph.chosen in result.graph.seconds and {"default", UNTUNED} <= set(result.graph.seconds)
    compilation = compile_with_report(module, (x,), db=db)
    with BestRecords(db) as records:  # the whole-graph timing decides between the estimate and the default
        chosen = choose(import_model(module, (x,)), records.latency)
    if result.graph.chosen in ("default", UNTUNED):
        chosen = variants(import_model(module, (x,)))[0]
    assert [key for *_, key in kernels(compilation.graph)] == [key for *_, key in kernels(chosen.graph)]
    want = module(x).detach().numpy()
    np.testing.assert_allclose(compilation.module(x.numpy()), want, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_tuning_both_blocks_records_their_kernels_and_compile_builds_the_faster_correctly(tmp_path):
    """A short real tuning of the direct kernels at both blocks (the other algorithms' left out to keep it short):
    each block's kernels get records, and compile(db=) picks a graph of timed kernels with the right outputs."""
    torch.manual_seed(0)
    module, x = TwoConvs().eval(), torch.randn(1, 16, 12, 12)
    tasks = [t for t in model_tasks(module, example_inputs=(x,)) if t.algorithm in ("direct", WIDE)]
    assert {t.algorithm for t in tasks} == {"direct", WIDE}
    db = tmp_path / "tune.db"
    policy = EvolutionaryPolicy(population=16, generations=1, measure_per_round=1)
    tune_tasks(tasks, db, policy, TuneOptions(trials=2 * len(tasks), confirm=0), callbacks=default_callbacks(False))
    with BestRecords(db) as records:
        assert all(records.latency(t.key) is not None for t in tasks)
        chosen = choose(import_model(module, (x,)), records.latency)
    assert set(chosen.choice.values()) <= {"direct", WIDE}  # the default's kernels have no records
    compilation = compile_with_report(module, (x,), db=db)
    assert [key for *_, key in kernels(compilation.graph)] == [key for *_, key in kernels(chosen.graph)]
    np.testing.assert_allclose(compilation.module(x.numpy()), module(x).detach().numpy(), rtol=1e-3, atol=1e-4)
