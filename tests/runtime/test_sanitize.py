"""Flags added to the defaults (`extra_cflags`), the AddressSanitizer build mode, and what loading needs."""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilegrad import config
from tilegrad.config import SANITIZER_FLAGS, Config
from tilegrad.errors import BuildError
from tilegrad.runtime import build

NEEDS_FLAG = """
#ifndef TG_EXTRA
#error TG_EXTRA is not defined
#endif
void tg_nothing(void **args) { (void)args; }
"""

OUT_OF_BOUNDS = r"""
#include <stdlib.h>
void tg_overflow(void **args) {
    float *x = calloc(16, sizeof(float));
    *(float *)args[0] = x[16];  /* one past the end */
    free(x);
}
"""

SRC = Path(__file__).resolve().parents[2] / "src"


def _asan_loaded() -> bool:
    return hasattr(ctypes.CDLL(None), "__asan_init")


def test_extra_cflags_come_after_the_defaults_and_are_used():
    with pytest.raises(BuildError, match="TG_EXTRA is not defined"):
        build(NEEDS_FLAG)
    with config.override(extra_cflags=("-DTG_EXTRA=1",)) as cfg:
        assert cfg.compile_flags == cfg.cflags + SANITIZER_FLAGS.get(cfg.sanitize, ()) + ("-DTG_EXTRA=1",)
        assert build(NEEDS_FLAG).is_file()


def test_sanitize_adds_its_flags_and_rejects_unknown_names():
    cfg = Config(sanitize="address", extra_cflags=("-DX",))
    assert cfg.compile_flags == cfg.cflags + SANITIZER_FLAGS["address"] + ("-DX",)
    with pytest.raises(ValueError, match="sanitize='thread'.*address"):
        Config(sanitize="thread")


def test_environment_variables_set_extra_flags_and_the_sanitizer():
    env = dict(os.environ, TILEGRAD_EXTRA_CFLAGS="-DA -DB", TILEGRAD_SANITIZE="address",
               PYTHONPATH=str(SRC))
    code = "from tilegrad import config; c = config.get(); print(c.extra_cflags, c.sanitize)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "('-DA', '-DB') address"


def test_an_asan_build_without_the_runtime_is_refused_with_the_fix():
    with config.override(sanitize="address"):
        if _asan_loaded():  # this suite itself running under benchmarks/asan_check.py
            assert build(NEEDS_FLAG.replace("#error", "#warning")).is_file()
        else:
            with pytest.raises(BuildError, match="LD_PRELOAD=.*libasan.so.*asan_check.py"):
                build(NEEDS_FLAG)


def test_asan_build_reports_an_out_of_bounds_read(tmp_path):
    """The mode really instruments kernels: a read one past a heap buffer is reported, and the run goes on."""
    runtime = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    assert os.path.isabs(runtime), "gcc has no AddressSanitizer runtime (libasan)"
    code = (f"import numpy as np\nfrom tilegrad.runtime import build, BufferSpec, Kernel\n"
            f"lib = build({OUT_OF_BOUNDS!r})\nout = np.zeros(1, np.float32)\n"
            f"Kernel(lib, 'tg_overflow', [BufferSpec('out', (1,), 'float32')])(out)\nprint('returned')\n")
    env = dict(os.environ, LD_PRELOAD=runtime, ASAN_OPTIONS="detect_leaks=0:halt_on_error=0",
               TILEGRAD_SANITIZE="address", TILEGRAD_CACHE_DIR=str(tmp_path), PYTHONPATH=str(SRC))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in proc.stderr, proc.stderr[-2000:]
    assert "returned" in proc.stdout
