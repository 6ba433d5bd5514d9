"""Generated kernels under AddressSanitizer: every kernel is built with TILEGRAD_SANITIZE=address (the default
flags plus -fsanitize=address), then the op tests, the small models' tests and the ONNX conformance runner over a
pattern run, and the AddressSanitizer reports are counted (the target is 0). Run:

    python benchmarks/asan_check.py                          # the default tests, models and pattern; a table
    python benchmarks/asan_check.py --json
    python benchmarks/asan_check.py --tests tests/frontend/test_onnx.py --pattern 'test_(conv|gemm)'

A library built with AddressSanitizer loads only into a process that loaded ASan's runtime first, so the script
re-executes itself with LD_PRELOAD=$(cc -print-file-name=libasan.so) (and libstdc++ after it, which PyTorch's and
ONNX Runtime's exceptions need) and ASAN_OPTIONS set: leak detection off
(kernels keep their scratch buffers for the life of the process), reports logged to files under a temporary
directory without stopping the run (the kernels are built with -fsanitize-recover=address), one file per process.
Each step runs as a child process that inherits those settings, and its reports are counted from the files it left.
The kernels go to the usual build cache, under keys of their own (the flags are part of a library's key).
The exit status is 1 when a step fails or any report was written.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ("tests/frontend/test_special_values.py", "tests/frontend/test_onnx.py", "tests/ir/test_registry.py",
         "tests/ir/test_ops_nn.py", "tests/ir/test_ops_reduce.py", "tests/ir/test_ops_shape.py",
         "tests/runtime/test_module.py")
MODELS = ("tests/frontend/test_models.py",)
PATTERN = "test_(conv|gemm|matmul|relu|max_pool|averagepool|softmax|gather|slice|concat|expand|reduce_max|topk)"
REPORT = "ERROR: AddressSanitizer"
_LOGS_VAR = "TILEGRAD_ASAN_LOGS"  # set by the re-executed parent for itself; the log directory


def _asan_loaded() -> bool:
    return hasattr(ctypes.CDLL(None), "__asan_init")


def _reexecute_under_asan() -> None:
    """Start this script again with ASan's runtime preloaded and the kernels built with it; does not return."""
    cc = os.environ.get("TILEGRAD_CC", "gcc")
    runtime, cxx = (subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
                    for name in ("libasan.so", "libstdc++.so.6"))
    if not os.path.isabs(runtime):
        sys.exit(f"{cc} has no AddressSanitizer runtime (-print-file-name=libasan.so gave {runtime!r}); install "
                 f"libasan (Debian/Ubuntu: apt install libasan8, or the one matching your gcc)")
    logs = tempfile.mkdtemp(prefix="tilegrad-asan-")
    env = dict(os.environ, TILEGRAD_SANITIZE="address", **{_LOGS_VAR: logs})
    # libstdc++ right after libasan: otherwise ASan's __cxa_throw finds no real one, and the first C++ exception
    # (PyTorch, ONNX Runtime) aborts the process.
    preload = [runtime, cxx if os.path.isabs(cxx) else "", os.environ.get("LD_PRELOAD", "")]
    env["LD_PRELOAD"] = " ".join(filter(None, preload))
    env["ASAN_OPTIONS"] = f"detect_leaks=0:halt_on_error=0:log_path={logs}/asan"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def _reports(logs: Path, seen: set[Path]) -> tuple[int, list[str]]:
    """Reports in the log files written since `seen` (which this adds them to), and their first lines."""
    count, firsts = 0, []
    for path in sorted(logs.glob("asan.*")):
        if path in seen:
            continue
        seen.add(path)
        lines = path.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if REPORT in line:
                count += 1
                firsts.append(" | ".join(lines[i:i + 4]))
    return count, firsts


def _step(name: str, cmd: list[str], logs: Path, seen: set[Path], timeout_s: float) -> dict:
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
        status, tail = ("passed" if proc.returncode == 0 else f"failed (exit {proc.returncode})",
                        (proc.stdout + proc.stderr).strip().splitlines()[-1:])
    except subprocess.TimeoutExpired:
        status, tail = f"timed out after {timeout_s:.0f} s", []
    reports, firsts = _reports(logs, seen)
    return {"step": name, "status": status, "reports": reports, "seconds": round(time.perf_counter() - start, 1),
            "summary": tail[0] if tail else "", "first_reports": firsts[:3]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", nargs="*", default=list(TESTS), help="pytest paths of op tests")
    ap.add_argument("--models", nargs="*", default=list(MODELS), help="pytest paths of model tests")
    ap.add_argument("--pattern", default=PATTERN, help="conformance node tests to run ('' for none)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per step")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not _asan_loaded():
        _reexecute_under_asan()
    logs, seen = Path(os.environ[_LOGS_VAR]), set()
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    steps = [("op tests", pytest + args.tests), ("models", pytest + args.models)]
    if args.pattern:
        steps.append((f"conformance {args.pattern}",
                      [sys.executable, "-m", "tilegrad.tools.conformance", "--pattern", args.pattern]))
    rows = [_step(name, cmd, logs, seen, args.timeout) for name, cmd in steps if cmd[-1] != "no:cacheprovider"]
    total = sum(r["reports"] for r in rows)
    if args.json:
        print(json.dumps({"reports": total, "steps": rows}, indent=1))
    else:
        print(f"{'step':60s} {'status':24s} {'reports':>7s} {'s':>7s}")
        for r in rows:
            print(f"{r['step'][:60]:60s} {r['status']:24s} {r['reports']:7d} {r['seconds']:7.1f}  {r['summary']}")
            for first in r["first_reports"]:
                print(f"    {first[:300]}")
        print(f"AddressSanitizer reports: {total} (logs in {logs})")
    return 1 if total or any(r["status"] != "passed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
