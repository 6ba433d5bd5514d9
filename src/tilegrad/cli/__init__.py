"""The `tilegrad` command: compile, run, bench, profile and info for ONNX models (compile, run, bench and profile
also for PyTorch models given as `path/to/file.py:factory`, see `frontend/model_spec.py`) and saved modules.

Every subcommand prints a short human report and exits 0; a mistake the user can fix (a bad file, an unsupported
op, a missing or misshapen input) is one line `tilegrad: error: ...` on stderr and exit status 2, and any other
failure (a bug) one line `tilegrad: internal error: ...` and exit status 1. `--debug` re-raises instead, for the
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from types import SimpleNamespace

import tilegrad

from .. import config
from ..errors import TilegradError
from . import bench, compile, info, profile, quantize, run, tune

USER_ERROR = 2
INTERNAL_ERROR = 1
SUBCOMMANDS = (compile, run, bench, tune, info, profile, quantize)  # in the order --help lists them


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or an argparse usage error (already reported on stderr)
        return int(exc.code or 0)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(name)s: %(message)s")
    try:
        with _threads(args.threads):
            args.command(args)
    except (TilegradError, OSError) as exc:
        if args.debug:
            raise
        message = " ".join(str(exc).split())  # one line, whatever the exception's text
        print(f"tilegrad: error: {message}", file=sys.stderr)
        return USER_ERROR
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("tilegrad: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:2000]
        print(f"tilegrad: internal error: {message} (a bug in tilegrad; --debug shows the traceback)",
              file=sys.stderr)
        return INTERNAL_ERROR
    return 0


@contextlib.contextmanager
def _threads(threads: int | None):
    """`--threads` for this command and the processes it starts (timing workers read the environment)."""
    if threads is None:
        yield
        return
    before = os.environ.get("TILEGRAD_NUM_THREADS")
    os.environ["TILEGRAD_NUM_THREADS"] = str(threads)
    try:
        with config.override(num_threads=threads):
            yield
    finally:
        if before is None:
            del os.environ["TILEGRAD_NUM_THREADS"]
        else:
            os.environ["TILEGRAD_NUM_THREADS"] = before


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show debug logging and raise errors with their traceback")
    shapes = argparse.ArgumentParser(add_help=False)
    shapes.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                        help="fix the shape of an input with symbolic dimensions; for a PyTorch model "
                             "(file.py:factory), the shape of forward's argument NAME (repeatable)")
    passes = argparse.ArgumentParser(add_help=False)
    passes.add_argument("--opt-level", type=int, choices=(0, 1, 2, 3), default=None,
                        help="graph passes to run: 0 none (one kernel per op) up to 3 (default 2)")
    passes.add_argument("--disable-pass", action="append", default=[], metavar="NAME",
                        help="skip this graph pass (repeatable)")
    passes.add_argument("--fusion", choices=("rules", "stitch"), default="rules",
                        help="fusion strategy: rule-based (default) or FusionStitching's search over plans")
    passes.add_argument("--attention-form", choices=("auto", "two_pass", "blockwise"), default="auto",
                        help="the attention kernels' softmax: auto (by shape: blockwise for long key sequences; "
                             "with --db, the faster tuned form), or two_pass or blockwise for all of them")
    passes.add_argument("--explain", action="store_true",
                        help="print what each graph pass changed, the kernel count and the intermediate memory")
    passes.add_argument("--target", choices=("cpu", "cuda"), default="cpu",
                        help="the machine to compile for: cpu (this one) or cuda (the first GPU, else sm_90); "
                             "`compile --target cuda` writes the CUDA source and its PTX and needs no GPU")
    passes.add_argument("--db", metavar="FILE", default=None,
                        help="tuning records (from `tilegrad tune`): each kernel takes its best tuned schedule")

    p = argparse.ArgumentParser(prog="tilegrad", description="A deep-learning compiler for ONNX and PyTorch "
                                "models.")
    p.add_argument("--debug", action="store_true", help="show debug logging and raise errors with their traceback")
    p.add_argument("--threads", type=_positive, default=None, metavar="N",
                   help="threads the kernels run on (default: the CPUs this process may use)")
    p.add_argument("--version", action="version", version=f"tilegrad {tilegrad.__version__}")
    sub = p.add_subparsers(title="commands", metavar="COMMAND", required=True)
    parents = SimpleNamespace(common=common, shapes=shapes, passes=passes)
    for command in SUBCOMMANDS:
        command.add_parser(sub, parents)
    return p
