"""The stitching explorer's figures (`passes.stitch_cost.FusionCosts`), measured on this machine and cached.

- seconds per byte: element-wise additions `c = a + b` over several sizes, from in-cache to far beyond the last
  level, each built through the normal kernel path (its default schedule, parallel and vectorised) and timed; the
  slope of the least-squares line of latency on bytes read and written;
- the cost of a kernel call: a kernel whose only work is a parallel loop of one empty iteration per thread;
- one light element-op: an `exp` over an in-cache array, per element, divided by the weight the evaluator gives an
  expensive op (`EXPENSIVE_WEIGHT`).
Measured once, each figure the best of a few repeats, and cached as JSON in the cache directory, one file per CPU
model, ISA and thread count (as `runtime/peaks.py` caches the machine's peaks).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from pathlib import Path

import numpy as np

from .. import config as _config
from .. import te
from ..ir.graph import Node, Value
from ..ir.registry import TensorType
from ..kernel import build
from ..passes.stitch_cost import EXPENSIVE_WEIGHT, FusionCosts
from ..runtime.peaks import isa_of
from ..runtime.timing import time_kernel
from ..schedule.schedule import Schedule
from ..target import host

_log = logging.getLogger(__name__)

SIZES = (1 << 12, 1 << 15, 1 << 18, 1 << 21, 1 << 23)  # elements per operand of the timed additions
IN_CACHE = 1 << 14  # elements of the exp that measures an op's cost


def cache_path(cfg: _config.Config | None = None) -> Path:
    """The file holding this CPU's, ISA's and thread count's fusion costs."""
    cfg = cfg or _config.get()
    target = host()
    key = "\n".join([target.model, isa_of(target), str(cfg.num_threads)])
    return Path(cfg.cache_dir) / "machine" / f"fusion-costs-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def measured_fusion_costs(remeasure: bool = False) -> FusionCosts:
    """The cached figures, or measured (a few seconds) and cached; `remeasure` measures again."""
    path = cache_path()
    if not remeasure:
        try:
            return FusionCosts(**json.loads(path.read_text()))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError) as exc:
            _log.warning("ignoring the unreadable fusion costs in %s (%s): measuring again", path, exc)
    costs = FusionCosts(seconds_per_byte=_seconds_per_byte(), call_seconds=_call_seconds(),
                        op_seconds=_op_seconds())
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.stem}.{uuid.uuid4().hex}.tmp")
    try:
        part.write_text(json.dumps(costs.to_json(), indent=1))
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return costs


def _best_seconds(kernel, arrays) -> float:
    return time_kernel(kernel.kernel, arrays, warmup=2, repeats=5, min_repeat_s=0.005).min


def _elementwise(op: str, n: int):
    """The built kernel of one element-wise node `op` over float32[n] operands, and its arguments."""
    t = TensorType((n,), "float32")
    arity = 2 if op == "add" else 1
    inputs = tuple(Value(f"x{k}", t) for k in range(arity))
    node = Node(op, op, inputs, (Value("y", t),), {})
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, n).astype("float32") for _ in range(arity + 1)]
    return build(node, name=f"fusion_cost_{op}"), arrays


def _seconds_per_byte() -> float:
    sizes, seconds = [], []
    for n in SIZES:
        kernel, arrays = _elementwise("add", n)
        sizes.append(3 * 4 * n)
        seconds.append(_best_seconds(kernel, arrays))
    slope, _ = np.polyfit(np.array(sizes, float), np.array(seconds), 1)
    return max(float(slope), 1e-13)


def _call_seconds() -> float:
    threads = _config.get().num_threads
    out = te.compute((threads,), lambda i: te.const(0.0, "float32"), name="empty")
    sch = Schedule(out)
    sch.parallel(out.name, sch.loops(out.name)[0])
    kernel = build(sch, name="fusion_cost_call")
    return _best_seconds(kernel, [np.empty(threads, "float32")])


def _op_seconds() -> float:
    kernel, arrays = _elementwise("exp", IN_CACHE)
    return _best_seconds(kernel, arrays) / (IN_CACHE * EXPENSIVE_WEIGHT)
