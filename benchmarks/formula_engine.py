"""The formula engine's costs: deriving feature formulas, evaluating a batch, smoothing, a descent step, an MLP update.

For a tiled sketch structure of a matmul (64 x 48 x 40, as `workloads.matmul_64x48x40`) and of a 3x3 convolution
(1 x 64 x 28 x 28 -> 64, padded) this times, in CPU seconds of this process (`time.process_time`: other work on a
shared machine disturbs it less than the wall clock), the minimum and median over repeats of

- deriving `FeatureFormulas` from the lowered symbolic kernel (extraction and numbering),
- evaluating them on a batch of 256 valid candidates,
- deriving the smoothed formulas (`SmoothFormulas`, tau = 1),
- one `GradientSearch` descent step (`steps=1`) from 8 seeds of the structure, with the shipped MLP,
- one `MLPCostModel.update` epoch on 256 rows of the structure's features (Adam on its weights).

Run it with one thread per library so the CPU time is one core's: docs and reviews quote its output.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/formula_engine.py [--repeats 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from tilegrad.kernel import lower_kernel
from tilegrad.tune.cost_model.mlp import MLPCostModel
from tilegrad.tune.features.extract import program_vector
from tilegrad.tune.features.formulas import FeatureFormulas
from tilegrad.tune.felix.smooth import SmoothFormulas
from tilegrad.tune.model import model_graph
from tilegrad.tune.search.gradient import GradientPolicy, GradientSearch
from tilegrad.tune.search.space import Candidate, TaskSpace
from tilegrad.tune.task import extract_tasks

BATCH = 256
SEEDS = 8


class _MatMul(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(48, 40))

    def forward(self, x):
        return x @ self.w


def _tasks() -> dict[str, object]:
    torch.manual_seed(0)
    (matmul,) = extract_tasks(model_graph(_MatMul().eval(), example_inputs=(torch.randn(64, 48),)))
    conv = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1, bias=False), torch.nn.ReLU()).eval()
    (conv_task,) = extract_tasks(model_graph(conv, example_inputs=(torch.randn(1, 64, 28, 28),)))
    return {"matmul 64x48x40": matmul, "conv2d 64x28x28 3x3": conv_task}


def _structure(space: TaskSpace):
    """The sampled structure with the most schedule variables (ties: the first drawn), its kernel and variables."""
    rng, best = random.Random(0), None
    for _ in range(60):
        c = space.sample(rng)
        key = space.structure_key(c)
        trace, params = space.sketches[key[0]].space(dict(key[1]))
        numeric = [t for tiling in params.tilings for t in tiling.vars] + [ch.var for ch in params.choices]
        if best is None or len(numeric) > len(best[2]):
            kernel = lower_kernel(space.task.compute(), trace.bind(dict(key[1])), name="candidate")
            best = (key, kernel, numeric)
    return best


def _cpu_times(fn, repeats: int) -> tuple[float, float]:
    """(min, median) CPU seconds of `fn` over `repeats` calls after one untimed call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times), statistics.median(times)


def workload_items(task) -> tuple[int, dict[str, Callable[[], object]]]:
    """The schedule variables of the task's structure, and the calls timed for it, by item name."""
    space = TaskSpace(task)
    key, kernel, numeric = _structure(space)
    formulas = FeatureFormulas(kernel, numeric)
    sketch, rng = space.sketches[key[0]], random.Random(1)
    cands = [Candidate.of(key[0], sketch.sample(rng, fixed=dict(key[1]))) for _ in range(BATCH)]
    batch = {v: np.array([c.values[v] for c in cands], np.int64) for v in formulas.variables}
    search = GradientSearch(space, MLPCostModel.pretrained(), GradientPolicy(steps=1, patience=10**6), seed=0)
    groups = {key: cands[:SEEDS]}
    search._descend(groups)  # derives the smoothed formulas once, outside the timing
    rows = program_vector(formulas.evaluate(batch))
    throughput = np.random.default_rng(0).uniform(0.1, 1.0, BATCH)
    labels = [task.key] * BATCH
    return len(formulas.variables), {
        "derive formulas": lambda: FeatureFormulas(kernel, numeric),
        f"evaluate {BATCH}": lambda: formulas.evaluate(batch),
        "derive smoothed": lambda: SmoothFormulas(formulas, 1.0),
        "descent step": lambda: search._descend(groups),
        "MLP update epoch": lambda: MLPCostModel(seed=0).update(rows, throughput, labels, epochs=1),
    }


def measure(name: str, task, repeats: int) -> list[dict]:
    n_vars, items = workload_items(task)
    out = []
    for item, fn in items.items():
        lo, med = _cpu_times(fn, repeats)
        out.append({"workload": name, "item": item, "variables": n_vars, "min_ms": lo * 1e3, "median_ms": med * 1e3})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [r for name, task in _tasks().items() for r in measure(name, task, args.repeats)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'workload':<22}{'item':<20}{'vars':>5}{'min ms':>10}{'median ms':>11}")
    for r in rows:
        print(f"{r['workload']:<22}{r['item']:<20}{r['variables']:>5}{r['min_ms']:>10.2f}{r['median_ms']:>11.2f}")


if __name__ == "__main__":
    main()
