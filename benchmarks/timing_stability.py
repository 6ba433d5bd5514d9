"""Is a kernel's timing inside the tuning loop stable? One task's default schedule is timed by a fresh measurer
alone, then first and last in batches of random candidates of the same task (as a search round measures them),
then alone again. A stable measurer gives the same figure everywhere (docs/benchmarks.md, "Timing stability").
Run:

    python benchmarks/timing_stability.py --model resnet50 --task "winograd_conv+relu[1x64x56"
"""

from __future__ import annotations

import argparse
import random
import sys

from models import MODELS, _export  # benchmarks/models.py, beside this script

from tilegrad.tune.measure import MeasureInput, Measurer
from tilegrad.tune.model import model_graph
from tilegrad.tune.search.space import TaskSpace
from tilegrad.tune.task import extract_tasks


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    p.add_argument("--task", default="winograd_conv+relu[1x64x56", help="the first task whose name starts so")
    p.add_argument("--batches", type=int, default=6)
    p.add_argument("--batch", type=int, default=15, help="random candidates per batch")
    a = p.parse_args(argv)
    module, args = MODELS[a.model]()
    tasks = extract_tasks(model_graph(_export(module.eval(), args)))
    task = next((t for t in tasks if t.name.startswith(a.task)), None)
    if task is None:
        p.error(f"no task of {a.model} starts with {a.task!r}; tasks: {', '.join(t.name for t in tasks)}")
    space, rng = TaskSpace(task), random.Random(0)

    def ms(r) -> str:
        return f"{r.latency * 1e3:.3f}" if r.valid else r.error_kind

    with Measurer() as measurer:
        default = MeasureInput(task, space.trace(space.default()))
        print(f"{task.name}: default schedule alone: {', '.join(ms(measurer.measure([default])[0]) for _ in range(3))}")
        for i in range(a.batches):
            others = [MeasureInput(task, space.trace(space.sample(rng))) for _ in range(a.batch)]
            rs = measurer.measure([default, *others, default])
            best = sorted(r.latency * 1e3 for r in rs[1:-1] if r.valid)[:3]
            print(f"batch {i}: default first {ms(rs[0])}, last {ms(rs[-1])}; fastest candidates "
                  f"{', '.join(f'{b:.3f}' for b in best)}")
        print(f"default schedule alone: {', '.join(ms(measurer.measure([default])[0]) for _ in range(3))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
