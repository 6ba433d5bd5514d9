"""A model's tuning tasks, and `tilegrad.tune`: tune every kernel of a model into a records database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..frontend.load import import_model
from ..passes import optimize
from .algorithms import algorithm_tasks, variants
from .callbacks import Callback, default_callbacks
from .cost_model import CostModel
from .graph_choice import confirm_graph
from .results import TuneResult
from .search import SearchPolicy
from .task import Task, extract_tasks
from .tuner import TuneOptions, tune_tasks
from ..target import Target


def tune(model, *, db: str | Path, input_shapes: Mapping[str, Sequence[int]] | None = None,
         example_inputs=None, opt_level: int = 2, policy: str | SearchPolicy = "gradient",
         cost_model: str | CostModel | None = None, algorithms: bool = True, progress: bool = True,
         callbacks: Sequence[Callback] = (), fusion_plans: bool = False, **options) -> TuneResult:
    """Tune every kernel of `model` (an ONNX model, or a torch.nn.Module with `example_inputs`) and append the
    measurements to the records database `db`; `tilegrad.compile(model, db=db)` then uses the best of them.
    `options` are the fields of `TuneOptions` (`trials=`, `budget=`, ...); `policy` a registered name or a policy
    with its own settings. With `algorithms`, the kernels of each convolution's other algorithms are tuned too,
    and compile picks the algorithms by the records (algorithms.py). With `fusion_plans`, the kernels of the
    stitched fusion plan are tuned too, and `compile(db=, fusion="stitch")` keeps whichever plan's kernels are
    faster. `callbacks` run after the default ones (say, `report.WriteReport`). Then the graph the records
    choose is timed whole against the default graph, and the faster one is what compile builds
    (`graph_choice.py`; `TuneResult.graph`)."""
    imported = import_model(model, example_inputs, input_shapes)
    tasks = (algorithm_tasks(variants(imported, opt_level=opt_level, fusion_plans=fusion_plans))
             if algorithms or fusion_plans else extract_tasks(optimize(imported, opt_level)[0]))
    result = tune_tasks(tasks, db, policy, TuneOptions(**options), cost_model=cost_model,
                        callbacks=[*default_callbacks(progress), *callbacks])
    if (algorithms or fusion_plans) and result.trials:
        result.graph = confirm_graph(imported, db, opt_level=opt_level, fusion_plans=fusion_plans)
    return result


def model_tasks(model, *, input_shapes=None, example_inputs=None, opt_level: int = 2,
                algorithms: bool = True, fusion_plans: bool = False) -> list[Task]:
    """The tasks of the graph `tilegrad.compile` builds, then (with `algorithms`) those of the variant graphs in
    which convolutions use their other algorithms (and with `fusion_plans`, the stitched graph's)."""
    if not (algorithms or fusion_plans):
        return extract_tasks(model_graph(model, input_shapes=input_shapes, example_inputs=example_inputs,
                                         opt_level=opt_level))
    return algorithm_tasks(variants(import_model(model, example_inputs, input_shapes), opt_level=opt_level,
                                    fusion_plans=fusion_plans))


def model_graph(model, *, input_shapes=None, example_inputs=None, opt_level: int = 2, target: Target | None = None):
    """The optimised graph `tilegrad.compile` builds kernels from, for `target` (default: this machine)."""
    graph, _ = optimize(import_model(model, example_inputs, input_shapes), opt_level, target=target)
    return graph
