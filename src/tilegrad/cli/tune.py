"""`tilegrad tune` (the model's kernels tuned into a records database, here or on a Ray cluster) and `tilegrad
ray-device` (this machine's cores registered as devices of a cluster)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..backend import backend_for
from ..target import TARGETS
from .common import MODEL_HELP, UsageError, dynamic_dims, load, seconds_text, specialized_values


def add_parser(sub, parents) -> None:
    """Its arguments, under `sub` (argparse subparsers)."""
    t = sub.add_parser("tune", parents=[parents.common, parents.shapes],
                       help="tune the model's kernels into a records database",
                       description="Search schedules for every kernel of the model, measuring candidates on this "
                                   "machine; the records go to --db, which `compile --db` then uses.")
    t.add_argument("model", help=MODEL_HELP)
    t.add_argument("--db", metavar="FILE", help="the records database (SQLite; created or resumed)")
    t.add_argument("--policy", default="gradient", metavar="NAME",
                   help="search policy, a registered name: gradient (Felix, the default), evolutionary (Ansor) "
                        "or autotvm (templates, XGBoost and simulated annealing)")
    t.add_argument("--trials", type=int, default=None, metavar="N", help="candidates to measure in all")
    t.add_argument("--budget", default=None, metavar="TIME", help="wall-clock budget: seconds, or e.g. 10m, 1h")
    t.add_argument("--measure-per-round", type=int, default=None, metavar="N",
                   help="candidates per round (default: 16 for gradient, 64 for evolutionary)")
    t.add_argument("--recheck", type=int, default=3, metavar="N",
                   help="times a new best is timed again beside the old best before it counts (default 3; 0: never)")
    t.add_argument("--opt-level", type=int, choices=(0, 1, 2, 3), default=2, help="graph passes (default 2)")
    t.add_argument("--target", choices=tuple(TARGETS), default="cpu",
                   help="the machine to tune for: cpu (this one) or cuda (the first GPU, which must be present)")
    t.add_argument("--no-algorithms", action="store_true",
                   help="tune only the kernels of the estimate's convolution algorithms, not the others' too")
    t.add_argument("--fusion-plans", action="store_true",
                   help="tune the kernels of the stitched fusion plan too; `compile --db --fusion stitch` then "
                        "keeps the faster plan")
    t.add_argument("--dynamic", action="append", default=[], metavar="NAME=LO:HI",
                   help="tune the module `compile --dynamic` builds, its kernels for the values of NAME from LO to "
                        "HI (a few log-spaced ones, or --sample's; repeatable)")
    t.add_argument("--sample", action="append", default=[], metavar="NAME=N,N,...",
                   help="with --dynamic NAME=LO:HI, the values of NAME the kernels are tuned at (repeatable)")
    t.add_argument("--list-tasks", action="store_true",
                   help="list the tasks (FLOPs, weight, share of the untuned latency) and stop")
    t.add_argument("--report", metavar="DIR", default=None,
                   help="write a tuning report to DIR/index.html: best-so-far curves, a table of the tasks, a "
                        "roofline against this machine's measured peaks and, for an ONNX model, the model's time "
                        "against ONNX Runtime's")
    t.add_argument("--ray", metavar="auto|ADDRESS", default=None,
                   help="build and time the candidates on a Ray cluster: auto (ray.init() on this machine) or the "
                        "address of a running cluster (HOST:6379 from a node of it, ray://HOST:10001 from "
                        "elsewhere); needs the ray extra")
    t.add_argument("--ray-key", metavar="KEY", default=None,
                   help="with --ray: time on the devices registered under KEY (`tilegrad ray-device`; default: "
                        "this machine's key, e.g. amd-epyc-7b13-avx2)")
    t.set_defaults(command=_tune)

    d = sub.add_parser("ray-device", parents=[parents.common],
                       help="register this machine's cores as tuning devices",
                       description="Register devices on this node of a Ray cluster under a key, for "
                                   "`tilegrad tune --ray ADDRESS --ray-key KEY`; they stay after this command "
                                   "ends. docs/tuning.md, \"Tuning on a cluster\".")
    d.add_argument("--address", default="auto", metavar="auto|ADDRESS",
                   help="the cluster (default auto: the one running on this machine, started with `ray start`)")
    d.add_argument("--key", default=None, metavar="KEY",
                   help="the key to register under (default: this machine's CPU model and ISA)")
    d.add_argument("--cores", action="append", default=[], metavar="LIST",
                   help="the cores of one device, e.g. 0-7 or 0,2,4 (repeatable, a device each; default: one device "
                        "of all cores)")
    d.add_argument("--list", action="store_true", help="list the keys registered on the cluster and stop")
    d.set_defaults(command=_ray_device)


def _tune(args) -> None:
    from ..tune.model import model_tasks, tune

    backend = backend_for(TARGETS[args.target]())
    backend.require_device()  # before loading the model: without a device there is nothing to time on
    dynamic = dynamic_dims(args.dynamic)
    samples = specialized_values(args.sample, "--sample")
    if samples and not dynamic:
        raise UsageError("--sample picks values of a dimension that --dynamic NAME=LO:HI keeps symbolic; give both")
    if dynamic and (args.list_tasks or args.ray or args.report or args.fusion_plans):
        raise UsageError("--dynamic tunes the dynamic module's kernels here; --list-tasks, --ray, --report and "
                         "--fusion-plans apply to fixed shapes")
    spec = load(args.model, args.input_shape, dynamic=bool(dynamic))
    if args.list_tasks:
        _list_tasks(model_tasks(spec.model, input_shapes=spec.input_shapes, example_inputs=spec.example_inputs,
                                opt_level=args.opt_level, algorithms=not args.no_algorithms,
                                fusion_plans=args.fusion_plans))
        return
    budget = _duration(args.budget) if args.budget else None
    if not args.db:
        raise UsageError("tune needs --db FILE, the records database to write")
    if args.trials is None and budget is None:
        raise UsageError("give --trials N or --budget TIME (or both)")
    if args.ray_key and not args.ray:
        raise UsageError("--ray-key needs --ray auto|ADDRESS")
    if args.ray and not backend.remote_measurers:
        raise UsageError("--ray measures on CPU devices; --target cuda times on this machine's GPU")
    callbacks, peers = [], {}
    if args.report:
        from ..peers import onnxruntime_peer
        from ..tune.report import WriteReport

        callbacks.append(WriteReport(args.report, _machine_peaks(), model=args.model))
        if spec.kind == "onnx":  # the report sets the model's time beside ONNX Runtime's
            peers["onnxruntime"] = onnxruntime_peer(spec.model)
    measurer = _ray_cluster().ray_measurer(args.ray, args.ray_key) if args.ray else None
    try:
        result = tune(spec.model, db=args.db, input_shapes=spec.input_shapes, example_inputs=spec.example_inputs,
                      opt_level=args.opt_level, policy=args.policy, algorithms=not args.no_algorithms,
                      callbacks=callbacks, fusion_plans=args.fusion_plans, trials=args.trials, budget=budget,
                      measure_per_round=args.measure_per_round, recheck=args.recheck, measurer=measurer,
                      target=args.target, peers=peers, dynamic=dynamic or None, samples=samples)
    finally:
        if measurer is not None:
            measurer.close()
    print(result.table())
    again = "".join(f" --dynamic {item}" for item in args.dynamic)
    if result.distribution is not None:
        print(f"{len(result.distribution)} dynamic kernels scheduled for their mean over {result.points} points")
    print(f"records in {result.db}; compile with: tilegrad compile {args.model} --db {result.db}{again} -o DIR")
    if args.report:
        print(f"report in {Path(args.report) / 'index.html'}")


def _ray_cluster():
    """`tune.measure.ray_cluster`, or a usage error saying how to install Ray."""
    try:
        from ..tune.measure import ray_cluster
    except ImportError as exc:
        raise UsageError(f"--ray and ray-device need Ray ({exc}): pip install 'tilegrad[ray]'") from None
    return ray_cluster


def _ray_device(args) -> None:
    cluster = _ray_cluster()
    try:
        cluster.connect(args.address, start=False)  # a cluster started here would end with this command
    except ConnectionError as exc:
        raise UsageError(f"no Ray cluster at {args.address} ({exc}); start one with `ray start --head`") from None
    if args.list:
        for key in cluster.keys():
            print(f"{key}: {len(cluster.devices(key))} devices")
        return
    key = args.key or cluster.default_key()
    for cores in args.cores or [None]:
        device = cluster.register_device(key, _cores(cores) if cores else None)
        about = cluster.describe(device)
        print(f"device {key} on {about['host']}, cores {_core_ranges(about['cores'])}")
    print(f"tune on them with: tilegrad tune MODEL --db FILE --ray {args.address} --ray-key {key} --trials N")


def _cores(text: str) -> list[int]:
    """"0-3,8" -> [0, 1, 2, 3, 8]."""
    cores = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cores += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        raise UsageError(f"--cores {text!r}: expected core numbers and ranges, e.g. 0-7 or 0,2,4") from None
    return cores


def _core_ranges(cores: Sequence[int]) -> str:
    """[0, 1, 2, 3, 8] -> "0-3,8"."""
    runs: list[list[int]] = []
    for c in cores:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def _machine_peaks():
    """This machine's FMA peak and memory bandwidth, which the report's roofline is drawn against."""
    from ..machine import measured_peaks

    return measured_peaks()


def _list_tasks(tasks) -> None:
    """Each task with its FLOPs, weight and share of the untuned latency (its default schedule, measured); the
    other convolution algorithms' tasks after, their share that of the kernels they would stand in for."""
    from ..tune.measure import MeasureInput, Measurer

    with Measurer() as measurer:
        results = measurer.measure([MeasureInput(t, t.default_trace()) for t in tasks])
    total = sum(t.weight * r.latency for t, r in zip(tasks, results) if r.valid and not t.algorithm) or 1.0
    default = [t for t in tasks if not t.algorithm]
    print(f"{len(default)} tasks, {sum(t.weight for t in default)} kernels; {len(tasks) - len(default)} tasks of "
          f"other convolution algorithms and layout blocks")
    print(f"{'#':>3} {'task':<48} {'algorithm':>9} {'weight':>6} {'MFLOP':>9} {'untuned':>10} {'share':>6}")
    for i, (t, r) in enumerate(zip(tasks, results)):
        share = t.weight * r.latency / total if r.valid else float("nan")
        print(f"{i:>3} {t.name[:48]:<48} {t.algorithm or '':>9} {t.weight:>6} {t.flops / 1e6:>9.1f} "
              f"{seconds_text(r.latency):>10} {share:>6.1%}")


def _duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except (ValueError, IndexError):
        raise UsageError(f"--budget {text!r}: expected seconds or a number with s, m or h (e.g. 10m)") from None
