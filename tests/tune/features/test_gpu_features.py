"""GPU features as formulas: on a GPU sketch lowered with its tile sizes left as variables, substituting an
assignment gives the features of the kernel lowered from that assignment; the launch shape, shared bytes and
registers agree with the loop IR's own accounting; coalescing and bank conflicts follow the thread stride."""

from __future__ import annotations

import random

import numpy as np

from tilegrad import te
from tilegrad.loop import lower
from tilegrad.loop.gpu import launch_of, shared_bytes
from tilegrad.schedule import Schedule
from tilegrad.schedule.schedule import apply_trace
from tilegrad.schedule.sketch import generate_sketches
from tilegrad.target import GPUS
from tilegrad.te import nn
from tilegrad.tune.features.extract import FEATURE_NAMES, STORE_SLOTS, extract, feature_count
from tilegrad.tune.features.formulas import FeatureFormulas
from tilegrad.tune.features.gpu import GPU_FEATURE_NAMES

H100 = GPUS["sm_90"]


def _matmul():
    a, b = te.placeholder((64, 48), "float32", "A"), te.placeholder((48, 40), "float32", "B")
    return [nn.matmul(a, b, name="C")]


def test_substituted_gpu_formulas_equal_the_concrete_kernels_features():
    sketch = generate_sketches(_matmul, H100)[1]
    trace, space = sketch.space({})
    numeric = [v for t in space.tilings for v in t.vars] + [c.var for c in space.choices]
    formulas = FeatureFormulas(lower(apply_trace(_matmul(), trace), "k"), numeric)
    assert formulas.names == FEATURE_NAMES + GPU_FEATURE_NAMES
    rng = random.Random(0)
    points = [sketch.sample(rng) for _ in range(6)]
    got = formulas.evaluate({v: np.array([p[v] for p in points]) for v in formulas.variables})
    for p, rows in zip(points, got):
        k = lower(apply_trace(_matmul(), sketch.bind(p)), "k")
        want = extract(k).to_numpy()
        np.testing.assert_allclose(rows, want, err_msg=str(p))
        column = {n: want[0, FEATURE_NAMES.__len__() + i] for i, n in enumerate(GPU_FEATURE_NAMES)}
        assert column["gpu_threads_per_block"] == launch_of(k).threads == sketch.tiles.threads(p)
        assert column["gpu_blocks"] == np.prod(launch_of(k).grid)
        assert column["gpu_shared_bytes"] == shared_bytes(k)


def _copy(stride: int, scope_shared: bool = False):
    """32 threads each copying one element of A at `stride` apart (through a shared buffer if asked)."""
    a = te.placeholder((32 * stride,), "float32", "A")
    b = te.compute((32,), lambda i: a[i * stride] + 1.0, name="B")
    sch = Schedule(b)
    sch.bind("B", "i", "threadIdx.x")
    if scope_shared:
        cached = sch.cache_read("A", "shared", ["B"])
        sch.compute_at(cached, "B", "i")
    return lower(sch.state, "copy")


def _gpu_column(k, name):
    rows = extract(k).to_numpy()
    return rows[:, len(FEATURE_NAMES) + GPU_FEATURE_NAMES.index(name)]


def test_coalescing_counts_the_sectors_a_warp_touches():
    assert list(_gpu_column(_copy(1), "gpu_global_sectors")) == [4 + 4]  # 128 bytes read, 128 written
    assert list(_gpu_column(_copy(1), "gpu_bytes_per_sector")) == [32.0]
    assert list(_gpu_column(_copy(8), "gpu_global_sectors")) == [32 + 4]  # each thread its own sector
    assert _gpu_column(_copy(8), "gpu_bytes_per_sector")[0] == 256 / 36


def test_cpu_kernels_keep_the_cpu_features_only():
    k = lower(Schedule(_matmul()).state, "k")
    assert extract(k).names == FEATURE_NAMES
    assert feature_count(False) == (2 + STORE_SLOTS) * len(FEATURE_NAMES)
    assert feature_count(True) == (2 + STORE_SLOTS) * (len(FEATURE_NAMES) + len(GPU_FEATURE_NAMES))


def test_bank_conflicts_grow_with_the_shared_stride_up_to_a_warp():
    degrees = [_gpu_column(_copy(s, scope_shared=True), "gpu_bank_conflicts")[-1] for s in (1, 2, 8, 64)]
    assert degrees == [1, 2, 8, 32]
