"""The OpenMP wait policy is chosen before the OpenMP runtime loads: idle threads sleep after `spin_us`, unless
the user's environment already says otherwise."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
LOAD_A_KERNEL = """
import os, numpy as np
from tilegrad.runtime import BufferSpec, Kernel, build
before = os.environ.get("GOMP_SPINCOUNT")
lib = build("void tg_one(void **a) { *(float *)a[0] = 1.0f; }")
Kernel(lib, "tg_one", [BufferSpec("x", (1,), "float32")])(np.zeros(1, np.float32))
print(before, os.environ.get("GOMP_SPINCOUNT"))
"""


@pytest.mark.parametrize("env, expected", [
    ({}, "None 0"),                                   # the default: sleep at once
    ({"TILEGRAD_SPIN_US": "50"}, "None 5000"),        # 100 spins per microsecond, libgomp's estimate
    ({"GOMP_SPINCOUNT": "7"}, "7 7"),                 # the user's choice stands
    ({"OMP_WAIT_POLICY": "active"}, "None None"),
])
def test_spin_count_is_set_when_the_first_kernel_loads(env, expected, tmp_path):
    base = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "TILEGRAD_SPIN_US")}
    full = dict(base, PYTHONPATH=str(SRC), TILEGRAD_CACHE_DIR=str(tmp_path), **env)
    out = subprocess.run([sys.executable, "-c", LOAD_A_KERNEL], env=full, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == expected
