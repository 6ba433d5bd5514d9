"""A model's tuning tasks, and `tilegrad.tune`: tune every kernel of a model into a records database."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..backend import backend_for
from ..errors import TilegradError
from ..extras import require
from ..frontend.load import import_model
from ..passes import optimize
from ..peers import Peer
from ..target import TARGETS, Target
from .algorithms import algorithm_tasks, variants
from .callbacks import default_callbacks
from .cost_model import CostModel
from .distribution import choose_for_distribution, kernels_of, point_tasks, sample_points
from .features.extract import feature_count
from .graph_choice import compile_untuned, compile_untuned_dynamic, confirm_dynamic, confirm_graph, graph_digest
from .measure import Measurer
from .range_task import PointsMeasurer, RangeTask
from .records import machine_fingerprint
from .results import TuneResult
from .search import SearchPolicy
from .search.policy import make_policy
from .task import Task, extract_tasks
from .tuner import tune_tasks
from .tuning_run import Callback, TuneOptions, TuningRun


def tune(model, *, db: str | Path, input_shapes: Mapping[str, Sequence[int]] | None = None,
         dynamic: Mapping[str, tuple[int, int]] | None = None, samples: Mapping[str, Sequence[int]] | None = None,
         points_apart: bool = False,
         example_inputs=None, opt_level: int = 2, policy: str | SearchPolicy = "gradient",
         cost_model: str | CostModel | None = None, algorithms: bool = True, progress: bool = True,
         callbacks: Sequence[Callback] = (), fusion_plans: bool = False, measurer: Measurer | None = None,
         target: str = "cpu", peers: Mapping[str, Peer] | None = None, **options) -> TuneResult:
    """Tune every kernel of `model` (an ONNX model, or a torch.nn.Module with `example_inputs`) and append the
    measurements to the records database `db`; `tilegrad.compile(model, db=db)` then uses the best of them.
    `options` are the fields of `TuneOptions` (`trials=`, `budget=`, ...); `policy` a registered name or a policy
    with its own settings. With `algorithms`, the kernels of each convolution's other algorithms (and of the
    attention kernels' other softmax form) are tuned too, and compile picks them by the records (algorithms.py).
    With `fusion_plans`, the kernels of the stitched fusion plan are tuned too, and `compile(db=,
    fusion="stitch")` keeps whichever plan's kernels are faster. `callbacks` run after the default ones (say,
    `report.WriteReport`). `measurer` builds and times the
    candidates (default: on this machine; `measure.ray_cluster.ray_measurer(...)` on a Ray cluster), and is
    left open for the caller to close. Then, if the candidates were timed on a machine like this one, the graph
    the records choose is timed whole against the default graph, tuned and untuned, and the fastest one is what
    compile builds (`graph_choice.py`; `TuneResult.graph`), with `peers` (other runtimes by label, say
    `{"onnxruntime": peers.onnxruntime_peer(proto)}`) timed in the same rounds for comparison. A `budget=`
    covers all of it: the search ends early enough for the confirmations. With `target="cuda"` the kernels are
    the GPU graph's, searched in their GPU sketches, scored on GPU features and timed on this machine's device
    (`_tune_on_device`). With `dynamic` (an ONNX model's dimensions with bounds, as `compile(dynamic=)` takes
    them), the kernels of the dynamic module are tuned for a distribution of the dimensions' values: at `samples`
    (values per dimension) or a few log-spaced ones, each kernel's schedule the best on their mean: a sketch
    policy searches each dynamic kernel as one task over the points (`range_task.py`), unless `points_apart`
    asks for a task per point and a choice among their best after (`distribution.py`; what AutoTVM's templates
    always do). Then, timed on this machine, the module is timed whole at the points with the records and
    without (`graph_choice.confirm_dynamic`; `TuneResult.graph`), and `compile(dynamic=, db=)` replays the records
    on the symbolic kernels only where the module ran faster with them."""
    if dynamic:
        if target not in TARGETS or not backend_for(TARGETS[target]()).symbolic_dims or example_inputs is not None:
            raise TilegradError(f"tune(dynamic=) tunes an ONNX model's dynamic dimensions for a target that compiles "
                                f"them ({target!r} does not, or the model is not ONNX)")
        return _tune_for_distribution(model, db=db, dynamic=dynamic, samples=samples, points_apart=points_apart,
                                      input_shapes=input_shapes,
                                      opt_level=opt_level, policy=policy, cost_model=cost_model, measurer=measurer,
                                      callbacks=[*default_callbacks(progress), *callbacks],
                                      options=TuneOptions(**options))
    if samples:
        raise TilegradError("samples= names values of dynamic dimensions: give their bounds with dynamic= too")
    if target not in TARGETS:
        raise TilegradError(f"target {target!r} is not supported; available: {', '.join(TARGETS)}")
    machine = TARGETS[target]()
    backend = backend_for(machine)
    if measurer is not None and not backend.remote_measurers:
        raise TilegradError(f"tune(target={target!r}) times on this machine's device; a measurer (a Ray cluster) "
                            "is for CPU targets only")
    if not backend.chooses_graph:
        return _tune_on_device(model, machine, db=db, input_shapes=input_shapes, example_inputs=example_inputs,
                               opt_level=opt_level, policy=policy, cost_model=cost_model,
                               callbacks=[*default_callbacks(progress), *callbacks], options=TuneOptions(**options))
    started = time.monotonic()
    options = TuneOptions(**options)
    imported = import_model(model, example_inputs, input_shapes)
    tasks = (algorithm_tasks(variants(imported, opt_level=opt_level, fusion_plans=fusion_plans))
             if algorithms or fusion_plans else extract_tasks(optimize(imported, opt_level)[0]))
    timed_here = measurer is None or measurer.fingerprint in (None, machine_fingerprint())
    untuned = compile_untuned(imported, opt_level=opt_level) if (algorithms or fusion_plans) and timed_here else None
    spent = time.monotonic() - started

    def outside_s(run: TuningRun) -> float:  # what the search leaves to this function: its start, and the end
        after = untuned.confirmation_s(run.build_s, len(peers or {})) if untuned is not None else 0.0
        return spent + after

    result = tune_tasks(tasks, db, policy, options, cost_model=cost_model, measurer=measurer,
                        callbacks=[*default_callbacks(progress), *callbacks], outside_s=outside_s)
    if untuned is not None and result.trials:
        deadline = None if options.budget is None else started + options.budget
        result.graph = confirm_graph(imported, db, opt_level=opt_level, fusion_plans=fusion_plans, untuned=untuned,
                                     deadline=deadline, peers=peers)
        for cb in callbacks:
            cb.graph_confirmed(result.graph)
    return result


def _tune_for_distribution(model, *, db, dynamic, samples, points_apart: bool, input_shapes, opt_level: int,
                           policy, cost_model, measurer: Measurer | None, callbacks: Sequence[Callback],
                           options: TuneOptions) -> TuneResult:
    """Tune the kernels of the graph `compile(dynamic=)` builds for sample points of its dimensions. A policy
    searching the sketches tunes each dynamic kernel as one task over the points (`range_task.py`: one descent
    for the whole range, each candidate timed at every point, recorded under the kernel's key with the mean);
    with `points_apart`, or with a policy of its own space (AutoTVM's templates), each point is a task, and then
    each kernel's schedule for the distribution is chosen among the points' best (`distribution.py`), the budget
    counting those timings, foretold at the run's mean seconds per candidate."""
    from ..frontend.load import onnx_proto
    from ..frontend.onnx_inputs import model_inputs, symbolic_shapes

    started = time.monotonic()
    proto = onnx_proto(model)
    if proto is None:
        raise TilegradError("tune(dynamic=) applies to an ONNX model (a path, bytes or onnx.ModelProto)")
    shapes = {**(input_shapes or {}), **symbolic_shapes(model_inputs(proto, input_shapes), dynamic)}
    imported = import_model(proto, None, shapes)
    graph, _ = optimize(imported, opt_level)
    del proto
    at = sample_points(graph, samples)
    kernels = kernels_of(graph, at)
    points = max(len(k.at_points) for k in kernels)
    timed_here = measurer is None or measurer.fingerprint in (None, machine_fingerprint())
    untuned = compile_untuned_dynamic(graph, at) if timed_here else None
    before = time.monotonic() - started

    def after_s(run: TuningRun) -> float:  # what came before the search, and the module's confirmation after
        return before + (untuned.confirmation_s(run.build_s) if untuned is not None else 0.0)

    own = measurer is None
    measurer = measurer or Measurer()
    try:
        if not points_apart and getattr(make_policy(policy), "space_for", None) is None:
            tasks = list({t.key: t for t in (k.as_range_task() if k.dynamic else k.task for k in kernels)}.values())
            result = tune_tasks(tasks, db, policy, options, cost_model=cost_model, measurer=PointsMeasurer(measurer),
                                callbacks=callbacks, outside_s=after_s)
            result.distribution = {r.task.key: r.best_s for r in result.tasks
                                   if isinstance(r.task, RangeTask) and math.isfinite(r.best_s)}
        else:
            tasks = point_tasks(kernels)
            crossings = sum(len(k.at_points) ** 2 for k in kernels if k.dynamic)  # each point's best, the default

            def outside_s(run: TuningRun) -> float:  # at the seconds per candidate so far, the defaults counted
                return crossings * run.elapsed() / (run.done + len(tasks)) + after_s(run)

            result = tune_tasks(tasks, db, policy, options, cost_model=cost_model, measurer=measurer,
                                callbacks=callbacks, outside_s=outside_s)
            result.distribution = choose_for_distribution(kernels, db, measurer)
    finally:
        if own:
            measurer.close()
    result.points = points
    if untuned is not None and result.trials:
        deadline = None if options.budget is None else started + options.budget
        result.graph = confirm_dynamic(graph, graph_digest(imported, opt_level=opt_level), db, at, untuned=untuned,
                                       deadline=deadline)
        for cb in callbacks:
            cb.graph_confirmed(result.graph)
    return result


def _tune_on_device(model, machine: Target, *, db, input_shapes, example_inputs, opt_level: int, policy, cost_model,
                    callbacks: Sequence[Callback], options: TuneOptions) -> TuneResult:
    """Tune the kernels of the graph built for `machine` (a GPU) on this machine's device. Without a device this
    fails first, before any import or compile. The records carry the device's fingerprint
    (`records.target_fingerprint`), so CPU and GPU records in one database never mix; the GPU features make a
    GPU task's vectors longer than the CPU model's, so the MLP starts fresh rather than from the CPU's
    pretrained weights. Convolution algorithms and fusion plans are CPU choices and are not tuned here."""
    require("torch", "tune", "the GPU tuner's MLP cost model")
    from .cost_model.mlp import MLPCostModel  # PyTorch, loaded where it is used

    backend = backend_for(machine)
    backend.require_device()
    tasks = extract_tasks(model_graph(model, input_shapes=input_shapes, example_inputs=example_inputs,
                                      opt_level=opt_level, target=machine), machine)
    chosen = make_policy(policy)
    if cost_model is None and chosen.cost_model == "mlp":
        cost_model = MLPCostModel(num_features=feature_count(gpu=backend.gpu_features))
    with backend.measurer(machine) as measurer:
        return tune_tasks(tasks, db, chosen, options, cost_model=cost_model, measurer=measurer,
                          callbacks=callbacks)


def model_tasks(model, *, input_shapes=None, example_inputs=None, opt_level: int = 2,
                algorithms: bool = True, fusion_plans: bool = False) -> list[Task]:
    """The tasks of the graph `tilegrad.compile` builds, then (with `algorithms`) those of the variant graphs in
    which convolutions use their other algorithms and attentions their other softmax form (and with
    `fusion_plans`, the stitched graph's)."""
    if not (algorithms or fusion_plans):
        return extract_tasks(model_graph(model, input_shapes=input_shapes, example_inputs=example_inputs,
                                         opt_level=opt_level))
    return algorithm_tasks(variants(import_model(model, example_inputs, input_shapes), opt_level=opt_level,
                                    fusion_plans=fusion_plans))


def model_graph(model, *, input_shapes=None, example_inputs=None, opt_level: int = 2, target: Target | None = None):
    """The optimised graph `tilegrad.compile` builds kernels from, for `target` (default: this machine)."""
    graph, _ = optimize(import_model(model, example_inputs, input_shapes), opt_level, target=target)
    return graph
