"""The attention kernels' softmax form as a tuning choice (tune/algorithms.py): where the default graph has
attention nodes, a variant graph with the other form on every one of them, whose kernels become tasks; the
records keep it when its kernels are faster, and compile(db=) builds the stored choice with unchanged outputs."""

import numpy as np

from tilegrad.api import compile_with_report
from tilegrad.frontend.onnx import import_onnx
from tilegrad.passes.attention_form import choose_form
from tilegrad.target import host
from tilegrad.tune.algorithms import algorithm_tasks, choose, variants
from tilegrad.tune.graph_choice import graph_digest
from tilegrad.tune.model import model_tasks
from tilegrad.tune.records import Database
from tilegrad.tune.task_scheduler import TaskScheduler, alternative_slots
from tilegrad.tune.task import kernels

from ..passes.test_attention_form import bert_attention, feeds, forms, onnxruntime

BLOCKWISE, TWO_PASS = "attention=blockwise", "attention=two_pass"


def _keys(variant) -> set[str]:
    return {key for *_, key in kernels(variant.graph)}


def test_a_graph_with_attention_has_a_variant_with_the_other_form_on_every_attention():
    default, *others = variants(import_onnx(bert_attention(80, layers=2)))
    assert forms(default.graph) == [("two_pass", 80)] * 2 and default.attention_form == "auto"
    (variant,) = others
    assert variant.algorithm == BLOCKWISE and variant.attention_form == "blockwise"
    assert forms(variant.graph) == [("blockwise", 80)] * 2
    assert [(c.form, c.why) for c in variant.report.decisions["attention"].values()] == [("blockwise",
                                                                                          "by option")] * 2
    long_default, long_variant = variants(import_onnx(bert_attention(2100)))
    form, block = choose_form(2100, 2100, 16, 16, host().l2_bytes)  # blockwise where L2 is under 2100 x 512 bytes
    other = {"blockwise": "two_pass", "two_pass": "blockwise"}[form]
    assert forms(long_default.graph) == [(form, block)]
    assert long_variant.algorithm == f"attention={other}" and forms(long_variant.graph) == [(other, block)]


def test_no_variant_where_the_form_is_fixed_or_there_is_no_attention():
    imported = import_onnx(bert_attention(80))
    assert [v.algorithm for v in variants(imported, attention_form="two_pass")] == [None]
    assert [v.algorithm for v in variants(imported, disable=["attention"])] == [None]


def test_the_variants_attention_kernels_become_tasks_labelled_with_the_form():
    imported = import_onnx(bert_attention(80, layers=2))
    default, variant = variants(imported)
    tasks = algorithm_tasks([default, variant])
    assert {t.key for t in tasks if t.algorithm is None} == _keys(default)
    labelled = [t for t in tasks if t.algorithm == BLOCKWISE]
    assert {t.key for t in labelled} == _keys(variant) - _keys(default)
    assert [(t.node.op, t.weight) for t in labelled] == [("attention", 2)]
    assert [t.key for t in model_tasks(bert_attention(80, layers=2))] == [t.key for t in tasks]


def test_each_forms_attention_kernel_is_an_alternative_the_scheduler_tunes():
    """Both forms' kernels run the same attention nodes, so the task scheduler weighs each (a place counts as its
    faster form) instead of leaving the variant's at weight 0 and its default schedule."""
    default, variant = variants(import_onnx(bert_attention(80, layers=2)))
    tasks = algorithm_tasks([default, variant])
    attention = [i for i, t in enumerate(tasks) if t.node.op == "attention"]
    assert sorted(tasks[i].algorithm or "" for i in attention) == ["", BLOCKWISE]
    assert {tasks[i].convolutions for i in attention} == {frozenset(c.name for c in variant.graph.nodes
                                                                    if c.op == "attention")}
    scheduler = TaskScheduler.for_tasks(tasks)
    assert [scheduler.weights[i] for i in attention] == [2.0, 2.0]
    slots = alternative_slots(tasks)
    assert len({slots[i][0] for i in attention}) == 1 and {slots[i][1] for i in attention} == {None, BLOCKWISE}
    others = [i for i in range(len(tasks)) if i not in attention]
    assert all(slots[i] is None for i in others)


def test_the_records_keep_the_form_whose_kernels_are_faster():
    imported = import_onnx(bert_attention(80))
    default, variant = variants(imported)
    blockwise = _keys(variant) - _keys(default)

    def records(fast: set[str], missing: set[str] = frozenset()):
        return lambda key: None if key in missing else 1e-5 if key in fast else 1e-3

    chosen = choose(imported, records(blockwise))
    assert chosen.algorithm == BLOCKWISE and forms(chosen.graph) == [("blockwise", 80)]
    assert chosen.report.decisions["attention"]
    assert choose(imported, records(_keys(default) - _keys(variant))).algorithm is None
    assert choose(imported, records(set(), missing=blockwise)).algorithm is None  # never timed: loses
    assert choose(imported, records(blockwise), attention_form="two_pass").algorithm is None


def test_compile_builds_the_stored_form_unless_the_option_fixes_another(tmp_path):
    model, inputs = bert_attention(80), feeds(80)
    db = tmp_path / "tune.db"
    with Database(db) as records:
        records.set_graph_choice(graph_digest(import_onnx(model)), {"choice": None, "fusion": "rules",
                                                                    "attention_form": "blockwise"})
    stored = compile_with_report(model, db=db)
    assert forms(stored.graph) == [("blockwise", 80)]
    np.testing.assert_allclose(stored.module(*inputs.values()), onnxruntime(model, inputs), rtol=1e-4, atol=1e-4)
    fixed = compile_with_report(model, db=db, attention_form="two_pass")
    assert forms(fixed.graph) == [("two_pass", 80)]
