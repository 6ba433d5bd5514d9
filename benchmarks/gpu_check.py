"""The CUDA backend on a real GPU, in one run that fits a short lease of the machine (issue 46).

In order, each part within what is left of `--budget` seconds, the results written after each part (so a run cut
short keeps what it measured): the machine (GPU, driver, NVRTC, cuda-bindings, torch); the `cuda`-marked tests;
the six models of benchmarks/models.py compiled with `target="cuda"`, checked against PyTorch on the GPU and timed
against PyTorch eager and torch.compile (default, then max-autotune while time remains); Felix (the gradient
policy) tuning ResNet-50's largest convolution and BERT-base's largest matrix product with the CUDA measurer.
What did not run says why. Run on the GPU machine (benchmarks/gpu_check.sh installs tilegrad first):

    python benchmarks/gpu_check.py OUT --budget 420     # OUT/gpu_check.json, OUT/tests.log

Latencies are host to host for every contender (inputs from host memory, outputs back to it), since a tilegrad
CUDA module is called with NumPy arrays; PyTorch runs float32 without TF32, as tilegrad does. Medians of
interleaved rounds.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

CUDA_TESTS = ["tests/runtime/test_cuda.py", "tests/tune/measure/test_measure_cuda.py",
              "tests/frontend/test_cuda_models.py", "tests/frontend/test_torch_backend.py"]
MODEL_ORDER = ["resnet50", "mobilenet_v2", "bert_base", "vit_b16", "gpt2_small", "dcgan_generator"]


class Check:
    """The results document and the clock every part is given its share of."""

    def __init__(self, out: Path, budget_s: float):
        self.out, self.deadline = out, time.monotonic() + budget_s
        self.doc: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "skipped": {}}
        self.contenders: dict = {}  # model -> (label -> a call, the module on the GPU, its inputs)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        (self.out / "gpu_check.json").write_text(json.dumps(self.doc, indent=1, default=str))

    def skip(self, what: str, why: str) -> None:
        self.doc["skipped"][what] = why
        print(f"skipped {what}: {why}", flush=True)
        self.save()


def machine(check: Check) -> bool:
    """The versions and the device; False where there is no device to check on."""
    import tilegrad
    from tilegrad.runtime.cuda import device_present
    from tilegrad.runtime.nvrtc import version

    env = {"python": platform.python_version(), "tilegrad": tilegrad.__file__, "nvrtc": version()}
    for package in ("torch", "cuda.bindings", "onnx", "onnxruntime", "numpy"):
        try:
            env[package] = __import__(package, fromlist=["_"]).__version__
        except ImportError as e:
            env[package] = f"absent ({e})"
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True)
        env["nvidia_smi"] = (smi.stdout or smi.stderr).strip()
    else:
        env["nvidia_smi"] = "absent"
    env["device_present"] = device_present()
    if env["device_present"]:
        gpu = tilegrad.target.cuda()
        env["target"] = {"model": gpu.model, "arch": gpu.arch, "sm_count": gpu.sm_count}
    check.doc["machine"] = env
    check.save()
    print(json.dumps(env, indent=1), flush=True)
    return env["device_present"]


def cuda_tests(check: Check, limit_s: float) -> None:
    """The `cuda`-marked tests in four processes; counts from pytest's summary line, the log beside the JSON."""
    cmd = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "-n", "4",
           "--dist", "loadgroup", "-rfE", *CUDA_TESTS]
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s)
        log, rc = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as e:
        log, rc = f"{e.stdout or ''}{e.stderr or ''}\ntimed out after {limit_s:.0f} s", "timeout"
    (check.out / "tests.log").write_text(log if isinstance(log, str) else log.decode())
    summary = [line for line in str(log).splitlines() if " passed" in line or " failed" in line or "error" in line]
    check.doc["tests"] = {"rc": rc, "seconds": round(time.monotonic() - start, 1),
                          "summary": summary[-1] if summary else None,
                          "failed": [line for line in str(log).splitlines() if line.startswith(("FAILED", "ERROR"))]}
    check.save()
    print(check.doc["tests"], flush=True)


def _median_ms(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """The largest difference against the output's scale."""
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def _interleaved(check: Check, name: str, contenders: dict, rounds: int) -> None:
    """Time the contenders in interleaved rounds into the model's row: medians, and ratios against tilegrad."""
    for fn in contenders.values():  # warm: first launches, autotuning caches
        fn(), fn()
    samples = {k: [] for k in contenders}
    for _ in range(rounds):
        for label, fn in contenders.items():
            samples[label].append(_median_ms(fn, 5))
            time.sleep(0.05)
    row = check.doc["models"][name]
    for label, values in samples.items():
        row[f"{label}_ms"] = round(statistics.median(values), 3)
        if label != "tilegrad":
            row[f"{label}_vs_tilegrad"] = round(row[f"{label}_ms"] / row["tilegrad_ms"], 3)
    check.save()


def one_model(check: Check, name: str, rounds: int) -> None:
    """Compile `name` for CUDA, check it against PyTorch on the GPU, and time it beside PyTorch eager; the module
    and its contenders stay in `check.contenders` for the torch.compile rounds."""
    import torch

    import models  # benchmarks/models.py, beside this script
    import tilegrad

    module, args = models.MODELS[name]()
    module.eval()
    row: dict = {"model": name}
    check.doc["models"][name] = row
    start = time.monotonic()
    compiled = tilegrad.compile(module, args, target="cuda")
    row["compile_s"] = round(time.monotonic() - start, 2)
    row["kernels"] = len(compiled.launches)
    host = [a.numpy() for a in args]
    gpu_module = copy.deepcopy(module).cuda()

    def eager():
        with torch.no_grad():
            return gpu_module(*[a.cuda() for a in args]).cpu()

    got = compiled(*host)
    got = got[0] if isinstance(got, list) else got
    want = eager().numpy()
    row["max_rel_error"] = relative_error(got, want)
    row["close_1e-3"] = bool(np.allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.max(np.abs(want)))))
    try:
        times = compiled.kernel_times(*host)
        row["kernel_ms_sum"] = round(1e3 * sum(t for _, t in times), 3)
        row["slowest_kernels_ms"] = [(k, round(1e3 * t, 4)) for k, t in sorted(times, key=lambda kt: -kt[1])[:6]]
    except Exception as e:  # noqa: BLE001 - the profile is extra; the row keeps the rest
        row["kernel_times_error"] = f"{type(e).__name__}: {e}"
    check.save()
    check.contenders[name] = ({"tilegrad": lambda: compiled(*host), "torch_eager": eager}, gpu_module, args)
    _interleaved(check, name, check.contenders[name][0], rounds)


def with_torch_compile(check: Check, name: str, rounds: int, mode: str | None) -> None:
    """torch.compile (Inductor; `mode` "max-autotune" or the default) timed with tilegrad and eager again."""
    import torch

    contenders, gpu_module, args = check.contenders[name]
    start = time.monotonic()
    inductor = torch.compile(gpu_module, mode=mode)
    with torch.no_grad():
        inductor(*[a.cuda() for a in args])
    label = f"torch_compile_{mode or 'default'}".replace("-", "_")
    check.doc["models"][name][f"{label}_s"] = round(time.monotonic() - start, 1)

    def run():
        with torch.no_grad():
            return inductor(*[a.cuda() for a in args]).cpu()

    contenders[label] = run
    _interleaved(check, name, contenders, rounds)


def felix(check: Check, name: str, ops: tuple[str, ...], budget_s: float) -> None:
    """The gradient policy on the model's largest task led by one of `ops` for `budget_s`, timed by the CUDA
    measurer."""
    import models
    from tilegrad.backend import backend_for
    from tilegrad.target import cuda
    from tilegrad.tune.cost_model.mlp import MLPCostModel
    from tilegrad.tune.features.extract import feature_count
    from tilegrad.tune.model import model_graph
    from tilegrad.tune.task import extract_tasks
    from tilegrad.tune.tuner import tune_tasks
    from tilegrad.tune.tuning_run import TuneOptions

    module, args = models.MODELS[name]()
    gpu = cuda()
    tasks = extract_tasks(model_graph(module.eval(), example_inputs=args, target=gpu), gpu)
    task = max((t for t in tasks if t.name.split("[")[0].split("+")[0] in ops), key=lambda t: t.flops)
    db = check.out / f"felix_{name}.db"
    with backend_for(gpu).measurer(gpu) as measurer:
        result = tune_tasks([task], db, "gradient", TuneOptions(budget=budget_s),
                            cost_model=MLPCostModel(num_features=feature_count(gpu=True)), measurer=measurer,
                            callbacks=[])
    (t,) = result.tasks
    check.doc["felix"][name] = {"task": task.name, "op": task.node.op, "gflop": task.flops / 1e9,
                                "budget_s": budget_s, "seconds": round(result.seconds, 1), "trials": t.trials,
                                "default_ms": t.default_s * 1e3, "best_ms": t.best_s * 1e3,
                                "speedup": round(t.speedup, 3),
                                "best_tflops": task.flops / t.best_s / 1e12 if t.best_s > 0 else None}
    check.save()
    print(check.doc["felix"][name], flush=True)


def guarded(check: Check, what: str, fn, *args) -> None:
    """Run one part; a failure is recorded with its traceback and the check goes on."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - every failure is a finding to record, not a reason to stop
        check.doc.setdefault("errors", {})[what] = f"{type(e).__name__}: {e}"
        (check.out / f"error_{what}.log").write_text(traceback.format_exc())
        print(f"{what} failed: {type(e).__name__}: {e}", flush=True)
        check.save()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for gpu_check.json and the logs")
    parser.add_argument("--budget", type=float, default=420, help="seconds for the whole check")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tests-s", type=float, default=150, help="the most seconds the tests may take")
    parser.add_argument("--tune-s", type=float, default=45, help="seconds of Felix per tuned task")
    parser.add_argument("--skip", default="",
                        help="comma-separated parts to leave out: tests,models,felix,compile,autotune")
    a = parser.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    check = Check(a.out, a.budget)
    skip = set(filter(None, a.skip.split(",")))
    if not machine(check):
        check.doc["error"] = "no CUDA device: the driver or a GPU is missing; nothing past the versions can run"
        check.save()
        print(check.doc["error"], file=sys.stderr)
        return 2
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # float32 against float32
    torch.backends.cudnn.allow_tf32 = False
    if "tests" not in skip:
        guarded(check, "tests", cuda_tests, check, min(a.tests_s, check.left() - 60))
    check.doc["models"], check.doc["felix"] = {}, {}
    for name in MODEL_ORDER:
        if "models" in skip or check.left() < 40:
            check.skip(f"model {name}", "left out" if "models" in skip else f"{check.left():.0f} s left")
            continue
        guarded(check, f"model_{name}", one_model, check, name, a.rounds)
    for name, ops in (("resnet50", ("conv",)), ("bert_base", ("gemm", "matmul"))):
        if "felix" in skip or check.left() < a.tune_s + 20:
            check.skip(f"felix {name}", "left out" if "felix" in skip else f"{check.left():.0f} s left")
            continue
        guarded(check, f"felix_{name}", felix, check, name, ops, a.tune_s)
    for mode, part, need_s in ((None, "compile", 60), ("max-autotune", "autotune", 120)):
        for name in MODEL_ORDER:
            if part in skip or check.left() < need_s or name not in check.contenders:
                check.skip(f"torch.compile {mode or 'default'} {name}",
                           "left out" if part in skip else f"{check.left():.0f} s left")
                continue
            guarded(check, f"torch_compile_{part}_{name}", with_torch_compile, check, name, a.rounds, mode)
    check.skip("search_efficiency", "not in this lease: the three policies need several minutes each")
    check.doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    check.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
