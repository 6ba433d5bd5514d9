"""The cost model's training set: workloads from the benchmark models and the model zoo, random programs of each
measured on this machine, and the training of `MLPCostModel` on them (TenSet's recipe, at the scale of one machine).

    python -m tilegrad.tools.dataset generate --db DATASET.db --minutes 30 [--suite zoo] [--per-task N] [--seed S]
    python -m tilegrad.tools.dataset train --db DATASET.db [--suite zoo] [--held-out bert,vgg16] [--out PATH]
    python -m tilegrad.tools.dataset retest --db DATASET.db [--suite zoo] [--tasks 100] [--minutes M] [--record]

Suites: "full" is small torch modules at the shapes of ResNet-50, MobileNetV2, BERT-base/GPT-2, ViT-B/16 and
DCGAN (convolutions 7x7/3x3/1x1, depthwise 3x3, dense layers, attention's matmuls, softmax, layer norm, pooling,
element-wise chains); "zoo" is every architecture of benchmarks/zoo.py (a source checkout's; transformers needed)
at full width, transformers cut to two layers (the same kernels), each at its example shape and at a second one
(a batch of ZOO_BATCH images or audio clips, ZOO_SEQUENCE tokens). Each workload goes through the compiler as a
model would (`model_graph`), so the tasks are the fused kernels tuning will see, deduplicated by workload key
across the suite, each remembering the models it is a kernel of. The task list is written beside the database
(`<db>.<suite>-suite.pickle`) by the first run and read by the later ones (`--fresh-suite` imports again).

`generate` measures, per task, the default schedule and then random candidates (`TaskSpace.sample`), with the
tuner's measurer (weights evicted from the caches before each timed call), visiting the tasks round-robin (those
with the fewest programs first) in batches until the time ends or every task has `per_task` programs, and
appends every result to the records database as it goes: a killed run keeps what it measured, and a rerun resumes (measured candidates count and are
never measured again). Records carry the machine's fingerprint, so databases of several CPUs stay apart.
`train` rebuilds the suite's tasks, reads their records (this machine's), derives each program's features from its
origin, and holds out a seeded tenth of the suite's models (or those named): every task of a held-out model is
validated on and never trained on, so the held-out ranking metrics are those of networks the model has not seen.
The tree model trained on the same split is the baseline. The weights go to `--out` (by default the package's
pretrained model) with a JSON provenance file beside them. `retest` times a sample of recorded programs again and
says on what share of pairs the two measurements agree, and from it the most any model's pairwise accuracy on
the labels can be; with `--record` it times the programs timed once again and keeps both timings, so that each
program's label is the least of two measurements taken apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..ir.graph import Graph, Node, Value
from ..tune.cost_model.mlp import LABELS, NUM_FEATURES, PRETRAINED, MLPCostModel
from ..tune.cost_model.model import labelling_peaks, speed_of
from ..tune.cost_model.trees import TreeCostModel, pair_counts, ranking_accuracy, top_k_recall
from ..tune.features.extract import aggregate_part
from ..tune.measure import MeasureInput, MeasureResult, Measurer
from ..tune.model import model_graph
from ..tune.records import Database, Record, machine_fingerprint
from ..tune.search.space import Candidate, TaskSpace
from ..tune.task import Task, extract_tasks

BATCH = 8  # candidates of one task measured per visit
MAX_WORKLOAD_BYTES = 3 << 30  # a workload with more weights is left out: compiling it needs several times this
MAX_WORKLOAD_MEMORY = 0.6  # of the machine's memory: a workload whose compile takes more is stopped and left out
SLIM_BYTES = 1 << 16  # weights above this are not kept by a suite's tasks (`_slim`)
SUITE_FORMAT = 2  # of the suite file beside a database (`suite_for`)
HELD_OUT_FRACTION = 0.1  # of a suite's models, validated on and never trained on
TRAIN_EPOCHS = 20  # more overfit the few dozen programs a task has (cross-validated)


# -- the workload suite ------------------------------------------------------------------------------------------


class _Conv(nn.Module):
    """Convolution, batch norm (folded by the compiler) and an optional activation, as in the models."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, groups: int, act: type | None, pad: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, pad, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = act() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class _Dense(nn.Module):
    def __init__(self, cin: int, cout: int, act: type | None = None):
        super().__init__()
        self.linear = nn.Linear(cin, cout)
        self.act = act() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.linear(x))


class _Fn(nn.Module):
    """A module around a function of the inputs (attention's matmuls, softmax, residual add + ReLU)."""

    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


@dataclasses.dataclass(frozen=True)
class Workload:
    """A module and its example inputs, made on demand; `model` is what a held-out split keeps together (the
    architecture a zoo workload comes from; the workload itself otherwise)."""

    name: str
    example: Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]
    model: str = ""

    @property
    def group(self) -> str:
        return self.model or self.name


def _seeded(build: Callable[[], nn.Module], shapes) -> Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    def example():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return build().eval(), tuple(torch.randn(s) for s in shapes)
    return example


def _conv(name, cin, cout, k, hw, stride=1, groups=1, act=nn.ReLU, pad=None):
    pad = k // 2 if pad is None else pad
    return Workload(name, _seeded(lambda: _Conv(cin, cout, k, stride, groups, act, pad), ((1, cin, hw, hw),)))


def _dw(c, hw, stride):
    return _conv(f"dw3x3_c{c}_{hw}_s{stride}", c, c, 3, hw, stride, c, nn.ReLU6)


def _dense(m, k, n, act=None):
    return Workload(f"dense_{m}x{k}x{n}" + ("_gelu" if act else ""), _seeded(lambda: _Dense(k, n, act), ((m, k),)))


def _fn(name, fn, *shapes):
    return Workload(name, _seeded(lambda: _Fn(fn), shapes))


_RESNET = [
    _conv("conv7x7_c3_64_224_s2", 3, 64, 7, 224, 2),
    *(_conv(f"conv3x3_c{c}_{hw}_s1", c, c, 3, hw) for c, hw in ((64, 56), (128, 28), (256, 14), (512, 7))),
    *(_conv(f"conv3x3_c{c}_{hw}_s2", c, c, 3, hw, 2) for c, hw in ((128, 56), (256, 28), (512, 14))),
    *(_conv(f"conv1x1_c{ci}_{co}_{hw}", ci, co, 1, hw) for ci, co, hw in
      ((64, 64, 56), (256, 64, 56), (64, 256, 56), (256, 128, 56), (512, 128, 28), (128, 512, 28),
       (1024, 256, 14), (256, 1024, 14), (2048, 512, 7), (512, 2048, 7))),
    *(_conv(f"conv1x1_c{ci}_{2 * ci}_{hw}_s2", ci, 2 * ci, 1, hw, 2, act=None) for ci, hw in
      ((256, 56), (512, 28), (1024, 14))),
    *(_fn(f"add_relu_{c}x{hw}", lambda a, b: torch.relu(a + b), (1, c, hw, hw), (1, c, hw, hw)) for c, hw in
      ((256, 56), (512, 28), (1024, 14))),
    _fn("global_avg_pool_2048x7", lambda x: x.mean((2, 3)), (1, 2048, 7, 7)),
]
_MOBILENET = [
    *(_dw(c, hw, s) for c, hw, s in ((32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1),
                                     (192, 28, 2), (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1))),
    *(_conv(f"pw1x1_c{ci}_{co}_{hw}", ci, co, 1, hw, act=a) for ci, co, hw, a in
      ((32, 16, 112, None), (16, 96, 112, nn.ReLU6), (144, 24, 56, None), (960, 160, 7, None))),
]
_TRANSFORMER = [
    *(_dense(m, k, n, act) for m, k, n, act in
      ((128, 768, 768, None), (128, 768, 2304, None), (128, 768, 3072, nn.GELU), (128, 3072, 768, None),
       (197, 768, 768, None), (197, 768, 3072, nn.GELU))),
    *(_fn(f"bmm_{h}x{t}x{d}x{t}", torch.matmul, (h, t, d), (h, d, t)) for h, t, d in ((12, 128, 64), (12, 197, 64))),
    *(_fn(f"bmm_{h}x{t}x{t}x{d}", torch.matmul, (h, t, t), (h, t, d)) for h, t, d in ((12, 128, 64), (12, 197, 64))),
    *(_fn(f"softmax_{h}x{t}x{t}", lambda x: x.softmax(-1), (h, t, t)) for h, t in ((12, 128), (12, 197))),
    *(Workload(f"layer_norm_{t}x768", _seeded(lambda: nn.LayerNorm(768), ((t, 768),))) for t in (128, 197)),
    _fn("gelu_128x3072", nn.functional.gelu, (128, 3072)),
    _fn("add_128x768", torch.add, (128, 768), (128, 768)),
    _conv("conv16x16_c3_768_224_s16", 3, 768, 16, 224, 16, act=None, pad=0),  # ViT's patch embedding
]
_DCGAN = [
    Workload(f"deconv4x4_c{ci}_{co}_{hw}_s2",
             _seeded(lambda ci=ci, co=co: nn.ConvTranspose2d(ci, co, 4, 2, 1, bias=False), ((1, ci, hw, hw),)))
    for ci, co, hw in ((512, 256, 4), (256, 128, 8), (128, 64, 16))
]

# The zoo suite: benchmarks/zoo.py's architectures at full size (a source checkout's), each at its example shape
# and at a second one: images and audio in a batch of ZOO_BATCH, text at ZOO_SEQUENCE tokens.
ZOO_BATCH = 4
ZOO_SEQUENCE = 32


def _zoo_module():
    """benchmarks/zoo.py of the checkout this package runs from; the zoo suite needs it and transformers."""
    import importlib

    benchmarks = Path(__file__).resolve().parents[3] / "benchmarks"
    if not (benchmarks / "zoo.py").exists():
        raise FileNotFoundError(f"the zoo suite needs a source checkout of tilegrad (no {benchmarks / 'zoo.py'})")
    if str(benchmarks) not in sys.path:
        sys.path.insert(0, str(benchmarks))
    return importlib.import_module("zoo")


def _resized(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...] | None:
    """The zoo example's second shape: token ids cut to ZOO_SEQUENCE, float inputs batched ZOO_BATCH times."""
    if all(not x.is_floating_point() and x.dim() == 2 for x in inputs):
        return tuple(x[:, :ZOO_SEQUENCE] for x in inputs) if inputs[0].shape[1] > ZOO_SEQUENCE else None
    if all(x.is_floating_point() for x in inputs):
        return tuple(x.expand(ZOO_BATCH, *x.shape[1:]).contiguous() for x in inputs)
    return None


def _zoo_workloads() -> list[Workload]:
    zoo = _zoo_module()

    def example(name: str, resized: bool):
        def build():
            module, inputs = zoo.build(name, "shallow")
            if resized:
                inputs = _resized(inputs)
            return module.eval(), inputs
        return build

    return [Workload(f"{name}{'@' + shape if shape else ''}", example(name, bool(shape)), model=name)
            for name in zoo.MODELS for shape in ("", "resized")]


SUITES: dict[str, Callable[[], list[Workload]]] = {
    "full": lambda: _RESNET + _MOBILENET + _TRANSFORMER + _DCGAN,
    "small": lambda: [_dense(16, 32, 24), _fn("add_relu_8x8", lambda a, b: torch.relu(a + b), (1, 8, 8, 8),
                                              (1, 8, 8, 8))],
    "zoo": _zoo_workloads,
}


@dataclasses.dataclass
class Suite:
    """A suite's tasks, deduplicated by key, and the models (`Workload.group`) each task is a kernel of."""

    tasks: list[Task]
    models: dict[str, set[str]]  # task key -> models
    workloads: int
    failed: dict[str, str]  # workload -> why it gave no tasks

    def model_names(self) -> set[str]:
        return set().union(*self.models.values()) if self.models else set()


def suite_for(db_path: str | Path, suite: str, progress: bool = False, fresh: bool = False) -> Suite:
    """The suite, from the file beside the database where a run wrote it before (the zoo's suite takes half an
    hour to import), else (or `fresh`) loaded (`load_suite`) and written there. The file is the database's
    task list: a later tilegrad whose passes make other kernels rebuilds it with `fresh` (records of tasks it no
    longer makes stay in the database, unused)."""
    import pickle

    path = Path(f"{db_path}.{suite}-suite.pickle")
    stamp = f"{suite} {SUITE_FORMAT}"
    if path.exists() and not fresh:
        with open(path, "rb") as f:
            kept_stamp, kept = pickle.load(f)
        if kept_stamp == stamp:
            return Suite(**{**kept, "tasks": [_restored(t) for t in kept["tasks"]]})
    loaded = load_suite(suite, progress)
    part = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(part, "wb") as f:  # plain fields: this module may run as __main__, whose classes would not load
        pickle.dump((stamp, {**vars(loaded), "tasks": [_slim(t) for t in loaded.tasks]}), f)
    os.replace(part, path)
    return loaded


def load_suite(suite: str = "full", progress: bool = False) -> Suite:
    """The suite's tasks, each workload imported and optimised as a model would be, in a process of its own
    (`_extract_apart`). A task keeps one node (its workload is all the dataset needs) and no large weight, so a
    suite of whole models costs little memory; a workload that fails to import or optimise, or needs more than
    MAX_WORKLOAD_MEMORY of this machine's memory, is left out and named in `failed`."""
    from tqdm import tqdm

    tasks: dict[str, Task] = {}
    models: dict[str, set[str]] = {}
    failed: dict[str, str] = {}
    workloads = SUITES[suite]()
    for w in tqdm(workloads, desc=f"{suite} suite", unit="workload", disable=not progress, dynamic_ncols=True):
        found, why = _extract_apart(w)
        if why is not None:
            failed[w.name] = why
        for task in found:
            tasks.setdefault(task.key, _restored(task))
            models.setdefault(task.key, set()).add(w.group)
    return Suite(list(tasks.values()), models, len(workloads), failed)


def _extract_apart(w: Workload) -> tuple[list[Task], str | None]:
    """The slim tasks of `w` (`_slim`), extracted in a forked process whose memory is watched, and why it gave
    none where it failed: a model whose compile runs away with memory is stopped there, not in this process."""
    import multiprocessing

    limit = MAX_WORKLOAD_MEMORY * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_extract_child, args=(w, send), daemon=True)
    child.start()
    send.close()
    answer = None
    while answer is None:
        if receive.poll(0.25):
            try:
                answer = receive.recv()
            except EOFError:
                answer = ("failed", f"its process ended without an answer (exit code {child.exitcode})")
        elif not child.is_alive() and not receive.poll(0):
            answer = ("failed", f"its process ended without an answer (exit code {child.exitcode})")
        elif _resident_bytes(child.pid) > limit:
            child.kill()
            answer = ("failed", f"compiling it took more than {limit / 2**30:.0f} GiB of memory")
    child.join()
    receive.close()
    return (answer[1], None) if answer[0] == "tasks" else ([], answer[1])


def _extract_child(w: Workload, send) -> None:
    try:
        module, inputs = w.example()
        weights = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
        if weights > MAX_WORKLOAD_BYTES:  # compiling it would need several times this
            send.send(("failed", f"{weights / 2**30:.1f} GiB of weights, above {MAX_WORKLOAD_BYTES / 2**30:.0f} GiB"))
        elif inputs is None:
            send.send(("tasks", []))
        else:
            send.send(("tasks", [_slim(t) for t in extract_tasks(model_graph(module, example_inputs=inputs))]))
    except Exception as exc:  # one architecture the installed packages cannot build leaves the rest
        send.send(("failed", f"{type(exc).__name__}: {str(exc)[:200]}"))
    finally:
        send.close()
        os._exit(0)  # no exit handlers of the parent's libraries in a forked child


def _resident_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _slim(task: Task) -> Task:
    """`task` with one node, and each large weight (its own, and those inside a fused node's body) a zero scalar
    standing for it (`_restored` broadcasts it back to the weight's shape, taking no memory): measurements draw
    their own inputs."""
    def light(v: Value) -> Value:
        if v.data is None or v.data.nbytes <= SLIM_BYTES:
            return v
        return dataclasses.replace(v, data=np.zeros((), v.data.dtype), origin=None)

    return dataclasses.replace(task, nodes=[_with_constants(task.node, light, {})])


def _restored(task: Task) -> Task:
    """A slim task (`_slim`) whose zero scalars are broadcast to their weights' shapes."""
    def whole(v: Value) -> Value:
        if v.data is None or v.data.shape == v.shape:
            return v
        return dataclasses.replace(v, data=np.broadcast_to(v.data, v.shape))

    return dataclasses.replace(task, nodes=[_with_constants(task.node, whole, {})])


def _with_constants(node: Node, change, memo: dict[int, Value]) -> Node:
    """`node` with `change(v)` for each constant input, in it and in the graphs of its attributes (a fused node's
    body), one replacement per constant (`memo`) so that a body and its node keep sharing them."""
    def value(v: Value) -> Value:
        if v.data is None:
            return v
        if id(v) not in memo:
            memo[id(v)] = change(v)
        return memo[id(v)]

    def graph(g: Graph) -> Graph:
        return dataclasses.replace(g, inputs=tuple(value(v) for v in g.inputs), outputs=tuple(value(v) for v in g.outputs),
                                   nodes=tuple(_with_constants(n, change, memo) for n in g.nodes))

    attrs = {k: graph(a) if isinstance(a, Graph) else a for k, a in node.attrs.items()}
    return dataclasses.replace(node, inputs=type(node.inputs)(value(v) for v in node.inputs), attrs=attrs)


def suite_tasks(suite: str = "full") -> list[Task]:
    """The suite's tasks (see `load_suite`)."""
    return load_suite(suite).tasks


# -- generate ----------------------------------------------------------------------------------------------------


class _Sampler:
    """One task's random candidates, never one measured before (in this run or an earlier one)."""

    def __init__(self, task: Task, db: Database, seed: int):
        self.task = task
        self.space = TaskSpace(task)
        self.rng = random.Random(f"{seed}:{task.key}")
        self.seen: set[Candidate] = {c for rec in db.records(task.key)
                                     if (c := self.space.from_origin(rec.origin)) is not None}
        self.exhausted = False

    def propose(self, n: int) -> list[Candidate]:
        batch = [] if self.space.default() in self.seen else [self.space.default()]
        for _ in range(20 * n):
            if len(batch) >= n:
                break
            c = self.space.sample(self.rng)
            if c not in self.seen and c not in batch:
                batch.append(c)
        self.exhausted = not batch
        return batch


def generate(db_path: str | Path, minutes: float, *, per_task: int = 400, seed: int = 0, suite: str = "full",
             progress: bool = True, fresh_suite: bool = False, models: set[str] | None = None) -> int:
    """Measure random programs of the suite's tasks, round-robin, for `minutes`; returns how many were added.

    `models` keeps the tasks that are kernels of those models only: the zoo suite's 2,928 tasks take days to
    measure a dozen programs each, so a new machine's first hours go to a few models' tasks, enough programs a
    task to rank them, rather than two a task of every model."""
    from tqdm import tqdm

    deadline = time.monotonic() + 60 * minutes
    loaded = suite_for(db_path, suite, progress, fresh_suite)
    for name, why in loaded.failed.items():
        print(f"left out {name}: {why}", file=sys.stderr)
    tasks = _tasks_of(loaded, models)
    added, failures = 0, _Failures()
    with Database(db_path) as db, Measurer(seed=seed) as measurer:
        samplers = []
        for t in tasks:
            try:
                samplers.append(_Sampler(t, db, seed))
            except Exception as e:  # noqa: BLE001 - one task's space must not end hours of collection
                print(f"left out task {t.name}: its space failed ({type(e).__name__}: {e})", file=sys.stderr)
        have = sum(min(len(s.seen), per_task) for s in samplers)
        bar = tqdm(total=len(samplers) * per_task, initial=have, unit="program", disable=not progress,
                   desc=f"{len(tasks)} tasks", dynamic_ncols=True, mininterval=2.0)
        try:
            while time.monotonic() < deadline:
                # the tasks with the fewest programs first: a resumed run covers the suite rather than
                # revisiting the tasks the last run began with
                todo = sorted((s for s in samplers if not s.exhausted and len(s.seen) < per_task),
                              key=lambda s: len(s.seen))
                if not todo:
                    break
                for s in todo:
                    if time.monotonic() >= deadline:
                        break
                    batch = s.propose(min(BATCH, per_task - len(s.seen)))
                    inputs = [MeasureInput(s.task, s.space.trace(c)) for c in batch]
                    results = measurer.measure(inputs) if inputs else []
                    failures.note(s.task, results)
                    for c, inp, r in zip(batch, inputs, results):
                        policy = "default" if c == s.space.default() else "random"
                        db.add(Record.from_measurement(inp, r, origin=s.space.origin(c, policy)))
                        s.seen.add(c)
                    added += len(batch)
                    bar.update(len(batch))
                    bar.set_postfix_str(f"{s.task.name[:32]}, {max(0.0, deadline - time.monotonic()) / 60:.1f} "
                                        "min left")
        finally:
            bar.close()
            if failures.counts:
                print(failures, file=sys.stderr)
    return added


class _Failures:
    """The measurements that failed, counted by kind, with the first few errors: a random program may fail to
    build or time out, but a run whose failures go unreported hides a broken runner (or kernel) behind its
    counts."""

    EXAMPLES = 5

    def __init__(self):
        self.counts: Counter[str] = Counter()
        self.examples: list[str] = []

    def note(self, task: Task, results: Sequence[MeasureResult]) -> None:
        for r in results:
            if not r.valid:
                self.counts[r.error_kind] += 1
                if len(self.examples) < self.EXAMPLES:
                    self.examples.append(f"{task.name}: {r.error_kind}: {(r.error or '').strip()[:400]}")

    def __str__(self) -> str:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.counts.items()))
        return "\n".join([f"failed measurements: {kinds}", *(f"  {e}" for e in self.examples)])


# -- train -------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Dataset:
    """Programs with features: x (N, NUM_FEATURES: `features.program_vector`), speed (`speed_of`: the fraction of
    the roofline reached; 0 for a failed one), task key per row."""

    x: np.ndarray
    throughput: np.ndarray
    groups: np.ndarray
    without_features: int  # records left out because their program's features are not derived


def load_dataset(db_path: str | Path, tasks: list[Task], peaks=None, workers: int = 1) -> Dataset:
    """The records of `tasks` on this machine, with the features of each program (from its origin) and its
    speed (`speed_of` with the machine's `peaks`). Deriving the features (each task's sketches lowered
    symbolically) is most of training's time, so `workers` processes share the tasks, in contiguous chunks whose
    results are joined in the tasks' order: the same dataset whatever their number."""
    count = max(1, min(workers, len(tasks)))
    size = max(1, -(-len(tasks) // count))
    chunks = [tasks[k:k + size] for k in range(0, len(tasks), size)]
    if count == 1:
        parts = [_task_rows(db_path, chunk, peaks) for chunk in chunks]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawned, not forked: a fork of a process whose torch and OpenMP threads are running may hang
        with ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context("spawn")) as pool:
            # slim: a restored task's broadcast weights would be pickled whole (a zoo suite's, tens of GB)
            slim = [[_slim(t) for t in chunk] for chunk in chunks]
            parts = list(pool.map(_task_rows, [db_path] * len(chunks), slim, [peaks] * len(chunks)))
    xs = [x for part in parts for x in part[0]]
    if not xs:
        raise ValueError(f"{db_path}: no records of the suite's tasks on this machine; run `generate` first")
    return Dataset(np.concatenate(xs), np.concatenate([t for part in parts for t in part[1]]),
                   np.asarray([g for part in parts for g in part[2]]), sum(part[3] for part in parts))


def _task_rows(db_path: str | Path, tasks: list[Task], peaks) -> tuple[list, list, list, int]:
    """`load_dataset`'s rows of `tasks`: per task with records, its programs' features and speeds; the task key
    per row; and how many records were left out for want of features."""
    xs, tps, groups, dropped = [], [], [], 0
    with Database(db_path) as db:
        for task in tasks:
            records = db.records(task.key)
            if not records:
                continue
            space = TaskSpace(_restored(task))
            latency = _recorded_latencies(space, records)
            if not latency:
                continue
            x = space.features(list(latency))
            ok = np.isfinite(aggregate_part(x)).all(axis=1) if x.shape[1] == NUM_FEATURES else np.zeros(len(x), bool)
            dropped += int((~ok).sum())
            xs.append(x[ok])
            tps.append(speed_of(task, np.array(list(latency.values()))[ok], peaks))
            groups += [task.key] * int(ok.sum())
    return xs, tps, groups, dropped


def _recorded_latencies(space: TaskSpace, records: list[Record]) -> dict[Candidate, float]:
    """Each recorded candidate of `space` and its lowest latency among `records` (infinite where it failed)."""
    latency: dict[Candidate, float] = {}
    for rec in records:
        c = space.from_origin(rec.origin)
        if c is not None:
            latency[c] = min(latency.get(c, math.inf), rec.latency)
    return latency


def accuracy_ceiling(agreement: float | None) -> float | None:
    """The most pairwise accuracy a perfect model can reach on one noisy timing, from two timings' `agreement`
    (`retest`)."""
    return None if agreement is None else round((1 + math.sqrt(max(2 * agreement - 1, 0.0))) / 2, 4)


def _timed_once(space: TaskSpace, records: list[Record]) -> set[Candidate]:
    """The candidates of `space` that `records` time exactly once."""
    times = Counter(space.from_origin(rec.origin) for rec in records)
    return {c for c, n in times.items() if c is not None and n == 1}


def _top1_throughput(model, x: np.ndarray, tp: np.ndarray, groups: np.ndarray) -> float:
    """Per task, the throughput of the model's favourite over the best one (TenSet's top-1 score), averaged."""
    scores = model.predict(x)
    ratios = []
    for key in np.unique(groups):
        rows = np.flatnonzero(groups == key)
        if tp[rows].max() > 0:
            ratios.append(tp[rows[np.argmax(scores[rows])]] / tp[rows].max())
    return float(np.mean(ratios)) if ratios else math.nan


def _metrics(model, x: np.ndarray, tp: np.ndarray, groups: np.ndarray) -> dict[str, float | None]:
    values = {"pairwise_accuracy": ranking_accuracy(model, x, tp, groups),
              "top1_recall": top_k_recall(model, x, tp, groups, 1),
              "top5_recall": top_k_recall(model, x, tp, groups, 5),
              "top1_throughput": _top1_throughput(model, x, tp, groups)}
    return {k: None if math.isnan(v) else round(v, 4) for k, v in values.items()}


def held_out_models(suite: Suite, fraction: float = HELD_OUT_FRACTION, seed: int = 0) -> set[str]:
    """A seeded `fraction` of the suite's models (at least one), whose every task is kept out of training."""
    names = sorted(suite.model_names())
    count = max(1, round(fraction * len(names)))
    return set(np.random.default_rng(seed).choice(names, size=min(count, len(names)), replace=False).tolist())


def _known(suite: Suite, models: set[str]) -> set[str]:
    """`models`, every one a model of `suite` (else ValueError, naming those that are not)."""
    unknown = models - suite.model_names()
    if unknown:
        raise ValueError(f"models {sorted(unknown)} are not in the suite; it has {sorted(suite.model_names())}")
    return models


def _tasks_of(suite: Suite, models: set[str] | None) -> list[Task]:
    """The suite's tasks that are kernels of `models` (every task for None); ValueError naming unknown models."""
    if models is None:
        return suite.tasks
    wanted = _known(suite, models)
    return [t for t in suite.tasks if suite.models[t.key] & wanted]


def train(db_path: str | Path, out: str | Path = PRETRAINED, *, epochs: int = TRAIN_EPOCHS, suite: str = "full",
          seed: int = 0, threads: int = 1, held_out: set[str] | None = None, label: str = "task") -> dict:
    """Train the MLP on the suite's records, write it to `out` and its provenance beside it; returns that.

    Validation is on held-out models (`held_out`, or a seeded tenth of the suite's): the tasks of those models,
    none of which the model trained on, so the figures say how it ranks programs of networks it has never seen.
    LightGBM trained on the same rows is scored beside it twice: reading the sums and maxes over stores, as the
    evolutionary search's trees do, and reading every store, as the MLP does."""
    loaded = suite_for(db_path, suite)
    held_out = _known(loaded, held_out) if held_out is not None else held_out_models(loaded, seed=seed)
    model = MLPCostModel(seed=seed, threads=threads, label=label)
    data = load_dataset(db_path, loaded.tasks, labelling_peaks(model), workers=threads)
    in_validation = np.array([bool(loaded.models[key] & held_out) for key in data.groups])
    val, fit = np.flatnonzero(in_validation), np.flatnonzero(~in_validation)
    if not len(fit) or not len(val):
        raise ValueError(f"{db_path}: the held-out models {sorted(held_out)} leave no programs to "
                         f"{'train on' if not len(fit) else 'validate on'}")
    start = time.monotonic()
    model.update(data.x[fit], data.throughput[fit], data.groups[fit], epochs=epochs)
    seconds = time.monotonic() - start
    trees = {"validation_tree_baseline": TreeCostModel(threads=threads, read=aggregate_part),  # the search's
             "validation_trees_every_store": TreeCostModel(threads=threads)}  # the same program vectors as the MLP
    for tree in trees.values():
        tree.update(data.x[fit], data.throughput[fit], data.groups[fit])
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    provenance = {
        "model": "MLPCostModel", "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_fingerprint(), "suite": suite, "workloads": loaded.workloads,
        "models": len(loaded.model_names()), "held_out_models": sorted(held_out),
        "tasks": len(np.unique(data.groups)), "validation_tasks": len(np.unique(data.groups[val])),
        "programs": len(data.groups), "train_programs": len(fit), "validation_programs": len(val),
        "programs_without_features": data.without_features, "label": label, "epochs": epochs, "seed": seed,
        "train_seconds": round(seconds, 1),
        "train": _metrics(model, data.x[fit], data.throughput[fit], data.groups[fit]),
        "validation": _metrics(model, data.x[val], data.throughput[val], data.groups[val]),
        **{name: _metrics(tree, data.x[val], data.throughput[val], data.groups[val]) for name, tree in trees.items()},
    }
    out.with_suffix(".json").write_text(json.dumps(provenance, indent=2) + "\n")
    return provenance


# -- retest ------------------------------------------------------------------------------------------------------

WIDE_SPREAD = 2.0  # a task whose recorded programs' 90th and 10th latency percentiles are this far apart


def retest(db_path: str | Path, *, tasks: int | None = 100, seed: int = 0, suite: str = "full", min_programs: int = 4,
           minutes: float | None = None, models: set[str] | None = None, record: bool = False,
           progress: bool = False) -> dict:
    """Time the recorded programs of up to `tasks` random tasks again (those with at least `min_programs` valid
    records on this machine; stopping after `minutes` if given) and compare the two orders: the share of each
    task's pairs that the new timings order as the recorded ones did, pooled as `ranking_accuracy` pools them.

    It is what a cost model's pairwise accuracy on these labels can be read against. A perfect model of the
    programs' speed orders a pair as one timing does with some probability p, and two timings with noise of their
    own agree on it with probability p^2 + (1 - p)^2, so a perfect model scores more than the agreement a: at
    most (1 + sqrt(2a - 1)) / 2 (`ceiling`; reached where every pair is equally hard, and above the truth where
    near ties mix with clear pairs), 0.942 where two timings agree on 0.890. Tasks whose programs all run within
    WIDE_SPREAD of each other are reported apart, as their orders are mostly noise. A program whose new
    measurement failed compares nothing and is counted by kind (`failed`). `models` keeps to the tasks of those
    models, as in `generate`; `tasks` None takes every task.

    Nothing is written to the database, unless `record`: then only the programs timed once are timed, and the new
    timings are added to their records, so that each program's label (`_recorded_latencies`: the least of its
    timings) is the better of two measurements taken apart. Interference only ever slows a run, and it comes in
    bursts: a kernel of a few microseconds recorded at 40 in one session re-times at 3 in the next (machine F).
    A recording run is resumable: the programs it timed are timed twice and not taken again."""
    from tqdm import tqdm

    loaded = suite_for(db_path, suite)
    wanted = _tasks_of(loaded, models)
    deadline = math.inf if minutes is None else time.monotonic() + 60 * minutes
    agree = {"all": [0.0, 0], "narrow": [0.0, 0], "wide": [0.0, 0]}
    ratios, measured, failures = [], 0, _Failures()
    with Database(db_path) as db, Measurer(seed=seed) as measurer:
        chosen = [t for t in wanted if sum(r.valid for r in db.records(t.key)) >= min_programs]
        if not chosen:
            raise ValueError(f"{db_path}: no task of the {suite} suite has {min_programs} valid records on this "
                             "machine; run `generate` first")
        random.Random(seed).shuffle(chosen)
        for task in tqdm(chosen[:tasks], unit="task", disable=not progress, dynamic_ncols=True, mininterval=2.0):
            if time.monotonic() >= deadline:
                break
            space = TaskSpace(task)
            records = db.records(task.key)
            recorded = {c: t for c, t in _recorded_latencies(space, records).items() if math.isfinite(t)}
            if record:
                once = _timed_once(space, records)
                recorded = {c: t for c, t in recorded.items() if c in once}
            if len(recorded) < 2:
                continue
            inputs = [MeasureInput(task, space.trace(c)) for c in recorded]
            results = measurer.measure(inputs)
            if record:
                for c, inp, r in zip(recorded, inputs, results):
                    db.add(Record.from_measurement(inp, r, origin=space.origin(c, "retest")))
            old = np.array(list(recorded.values()))
            new = np.array([r.latency if r.valid else math.inf for r in results])
            failures.note(task, results)
            ok = np.isfinite(new)
            correct, pairs = pair_counts(1 / new[ok], 1 / old[ok])
            spread = np.quantile(old, 0.9) / np.quantile(old, 0.1)
            for kind in ("all", "wide" if spread >= WIDE_SPREAD else "narrow"):
                agree[kind][0] += correct
                agree[kind][1] += pairs
            ratios += list(new[ok] / old[ok])
            measured += 1
    share = {k: round(c / p, 4) if p else None for k, (c, p) in agree.items()}
    return {"machine": machine_fingerprint(), "tasks": measured, "programs": len(ratios),
            "pairs": agree["all"][1], "agreement": share["all"], "ceiling": accuracy_ceiling(share["all"]),
            "agreement_within_spread": {f"below {WIDE_SPREAD:g}x": share["narrow"],
                                        f"{WIDE_SPREAD:g}x and above": share["wide"]},
            "pairs_within_spread": {f"below {WIDE_SPREAD:g}x": agree["narrow"][1],
                                    f"{WIDE_SPREAD:g}x and above": agree["wide"][1]},
            "median_new_over_recorded": round(float(np.median(ratios)), 4) if ratios else None,
            "failed": failures.counts, "failures": failures.examples}


# -- command line ------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tilegrad.tools.dataset", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="measure random programs of the suite's tasks into a database")
    gen.add_argument("--db", required=True, help="records database (created or resumed)")
    gen.add_argument("--minutes", type=float, required=True, help="time budget")
    gen.add_argument("--per-task", type=int, default=400, help="stop measuring a task at this many programs")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--suite", choices=sorted(SUITES), default="full")
    gen.add_argument("--no-progress", action="store_true")
    gen.add_argument("--fresh-suite", action="store_true",
                     help="import the suite's workloads again rather than read the task list beside the database")
    gen.add_argument("--models", default=None,
                     help="comma-separated models of the suite: measure only the tasks that are their kernels")
    tr = commands.add_parser("train", help="train the MLP cost model on a generated database")
    tr.add_argument("--db", required=True)
    tr.add_argument("--out", default=str(PRETRAINED), help="weights (.npz); the provenance .json goes beside")
    tr.add_argument("--epochs", type=int, default=TRAIN_EPOCHS)
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--suite", choices=sorted(SUITES), default="full")
    tr.add_argument("--threads", type=int, default=1,
                    help="torch threads for training, and processes deriving the programs' features")
    tr.add_argument("--label", choices=LABELS, default="task",
                    help="what the model predicts: the fraction of the roofline, or of the task's best")
    tr.add_argument("--held-out", default=None,
                    help="comma-separated models to validate on and never train on (default: a seeded tenth)")
    rt = commands.add_parser("retest", help="time recorded programs again: how far two measurements agree")
    rt.add_argument("--db", required=True)
    rt.add_argument("--tasks", type=int, default=None,
                    help="random tasks whose programs are timed again (default 100; with --record, every task)")
    rt.add_argument("--minutes", type=float, default=None, help="stop after this long")
    rt.add_argument("--seed", type=int, default=0)
    rt.add_argument("--suite", choices=sorted(SUITES), default="full")
    rt.add_argument("--models", default=None, help="comma-separated models of the suite: only their tasks")
    rt.add_argument("--record", action="store_true",
                    help="time the programs timed once and add the new timings: each label the least of two")
    rt.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "retest":
        tasks = args.tasks if args.tasks is not None or args.record else 100
        print(json.dumps(retest(args.db, tasks=tasks, seed=args.seed, suite=args.suite, minutes=args.minutes,
                                models=_names(args.models), record=args.record, progress=not args.no_progress),
                         indent=2))
    elif args.command == "generate":
        n = generate(args.db, args.minutes, per_task=args.per_task, seed=args.seed, suite=args.suite,
                     progress=not args.no_progress, fresh_suite=args.fresh_suite,
                     models=_names(args.models))
        print(f"measured {n} programs into {args.db}")
    else:
        held_out = _names(args.held_out)
        provenance = train(args.db, args.out, epochs=args.epochs, suite=args.suite, seed=args.seed,
                           threads=args.threads, held_out=held_out, label=args.label)
        print(json.dumps(provenance, indent=2))
        print(f"wrote {args.out} and {Path(args.out).with_suffix('.json')}")


def _names(arg: str | None) -> set[str] | None:
    return set(arg.split(",")) if arg else None


if __name__ == "__main__":
    main()
