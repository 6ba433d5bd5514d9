"""The latency-evaluator by measurement: the stitching explorer's final plans ranked by timing their kernels.

`passes/stitch.py` ranks its beam's plans by a model unless the pass options hold `rank_plans`, a function from the
plans' graphs to their latencies; this is that function, which the tuner passes when it builds the stitched
variant (`algorithms.build_variant`). Each distinct kernel of the graphs (by workload key, so the kernels the plans
share are timed once) is built through the normal kernel path with its default schedule and timed on random
arguments; a graph's latency is the sum over its kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir.graph import Graph
from ..kernel import build
from ..runtime.kernel import random_arguments
from ..runtime.timing import time_kernel
from .task import kernels


def measured_latencies(graphs: Sequence[Graph]) -> list[float]:
    """Each graph's summed kernel latency, every distinct kernel built and timed once (median of 5)."""
    seconds: dict[str, float] = {}
    rng = np.random.default_rng(0)
    totals = []
    for g in graphs:
        total = 0.0
        for node, _, key in kernels(g):
            if key not in seconds:
                built = build(node, name="plan_kernel")
                arrays = random_arguments(built.kernel.params, rng)
                seconds[key] = time_kernel(built.kernel, arrays, warmup=1, repeats=5, min_repeat_s=0.002).median
            total += seconds[key]
        totals.append(total)
    return totals
