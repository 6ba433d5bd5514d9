"""Ansor's GPU sketch without a GPU: sampled candidates of each heavy workload family (matmul, batch matmul, dense,
conv2d, conv3d, and a matmul with an epilogue) are race-free, compile to PTX with NVRTC, and, rendered serially as
C after the GPU rewrites, equal NumPy's numbers; candidates past the target's limits are invalid."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from tilegrad import te
from tilegrad.codegen.c import CRenderer
from tilegrad.codegen.cuda import CudaRenderer
from tilegrad.loop import lower
from tilegrad.loop.gpu import launch_of, rewrite_for_gpu, shared_bytes
from tilegrad.runtime.build import build
from tilegrad.runtime.kernel import BufferSpec, Kernel
from tilegrad.runtime.nvrtc import compile_ptx
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.schedule import apply_trace
from tilegrad.schedule.sketch import generate_sketches
from tilegrad.schedule.sketch_gpu import GpuSketch
from tilegrad.target import GPUS
from tilegrad.te import nn
from tilegrad.te.interpret import interpret
from tilegrad.workloads import WORKLOADS

H100 = GPUS["sm_90"]
FAMILIES = ["matmul_64x48x40", "batch_matmul_3x17x12x9", "dense_5x24x10", "conv2d_3x3_c4_14x14",
            "conv3d_c4_6x7x5"]  # conv3d: four tiled axes, the outer two fused into threadIdx.z


def _matmul_relu():
    a, b = te.placeholder((32, 24), "float32", "A"), te.placeholder((24, 16), "float32", "B")
    c = nn.matmul(a, b, name="C")
    return [a, b], te.compute(c.shape, lambda i, j: te.maximum(c[i, j], 0.0), name="relu")


CASES = {**{n: WORKLOADS[n] for n in FAMILIES}, "matmul_relu": _matmul_relu}


def _gpu_sketch(make) -> GpuSketch:
    sketches = generate_sketches(lambda: [make()[1]], H100)
    assert [s.name for s in sketches] == ["default", "gpu_tiling"]
    return sketches[1]


def _valid_samples(sketch, n, seed=0):
    rng, out = random.Random(seed), []
    while len(out) < n:
        p = sketch.sample(rng)
        if sketch.valid(p):
            out.append(p)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_sampled_gpu_candidates_are_race_free_compile_to_ptx_and_match_numpy(name):
    make = CASES[name]
    sketch = _gpu_sketch(make)
    rng = np.random.default_rng(0)
    for params in _valid_samples(sketch, 3):
        inputs, output = make()
        st = apply_trace(output, sketch.bind(params))
        k = lower(st, name, inputs + [st.outputs[0]])
        source = CudaRenderer(H100).render(k)  # the renderer checks races and the target's limits
        assert "__shared__" in source and "__syncthreads();" in source
        assert f".entry {name}" in compile_ptx(source, H100.arch)
        assert launch_of(k).threads == sketch.tiles.threads(params)
        assert shared_bytes(k) <= sketch.tiles.shared_bytes(params)
        values = {t.name: rng.standard_normal(t.shape).astype(t.dtype) for t in inputs}
        kernel = Kernel(build(CRenderer().render(rewrite_for_gpu(k))), name,
                        [BufferSpec(b.name, tuple(int(d.value) for d in b.shape), b.dtype) for b in k.params])
        out = np.empty(output.shape, output.dtype)
        kernel(*[values[t.name] for t in inputs], out)
        np.testing.assert_allclose(out, interpret(output, values), rtol=1e-4, atol=1e-4, err_msg=str(params))


def test_candidates_past_the_targets_limits_are_invalid():
    sketch = _gpu_sketch(CASES["matmul_64x48x40"])
    params = _valid_samples(sketch, 1)[0]
    threads, shared = sketch.tiles.threads(params), sketch.tiles.shared_bytes(params)
    small = dataclasses.replace(H100, max_threads_per_block=threads - 1)
    tight = dataclasses.replace(H100, shared_bytes_per_block=shared - 1)
    for target, why in ((small, "threads a block"), (tight, "bytes of shared memory")):
        limited = generate_sketches(lambda: [CASES["matmul_64x48x40"]()[1]], target)[1]
        assert not limited.valid(params) and why in limited.over_limits(params)
    one_thread_all_registers = {**params, **{v: 64 for v in ("C_local_i_t1", "C_local_i_t2", "C_local_i_t3")},
                                **{v: 40 for v in ("C_local_j_t1", "C_local_j_t2")}, "C_local_j_t3": 40}
    assert "registers" in sketch.over_limits(one_thread_all_registers)


def test_element_wise_kernels_have_no_gpu_tiling():
    assert [s.name for s in generate_sketches(lambda: [WORKLOADS["add_gelu_4x33"]()[1]], H100)] == ["default"]


def test_thread_counts_are_expressions_of_the_tiles_and_bind_to_integers():
    from tilegrad.schedule.trace import Trace

    sketch = _gpu_sketch(CASES["matmul_64x48x40"])
    trace, _ = sketch.space({})
    fetch_splits = [st for st in trace.steps if st.kind == "split" and "//" in str(dict(st.args)["factor"])]
    assert fetch_splits, "the cooperative fetch splits by the threads of an axis, a quotient of two tile sizes"
    params = _valid_samples(sketch, 1)[0]
    bound = sketch.bind(params)
    assert not bound.variables()
    assert Trace.from_json(bound.to_json()) == bound


def test_samples_stay_within_a_small_targets_limits():
    small = dataclasses.replace(H100, max_threads_per_block=64, shared_bytes_per_block=4096)
    sketch = generate_sketches(lambda: [CASES["matmul_64x48x40"]()[1]], small)[1]
    rng = random.Random(1)
    for _ in range(20):
        params = sketch.sample(rng)
        assert sketch.tiles.threads(params) <= 64 and sketch.tiles.shared_bytes(params) <= 4096


@pytest.mark.parametrize("name", ["add_gelu_4x33", "softmax_4x6x40", "reduce_mean_keepdims"])
def test_the_gpu_default_sketch_picks_the_threads_of_untiled_kernels(name):
    make = WORKLOADS[name]
    (default,) = generate_sketches(lambda: [make()[1]], H100)
    (choice,) = default.structural
    assert choice.var.endswith("_threads") and choice.start == 256 and 1024 in choice.values
    rng = np.random.default_rng(0)
    for threads in (32, 1024):
        inputs, output = make()
        params = default.completed({choice.var: threads})
        st = apply_trace(output, default.bind(params))
        k = lower(st, name, inputs + [st.outputs[0]])
        assert launch_of(k).block[0] <= threads
        assert f".entry {name}" in compile_ptx(CudaRenderer(H100).render(k), H100.arch)
        values = {t.name: rng.standard_normal(t.shape).astype(t.dtype) for t in inputs}
        kernel = Kernel(build(CRenderer().render(rewrite_for_gpu(k))), name,
                        [BufferSpec(b.name, tuple(int(d.value) for d in b.shape), b.dtype) for b in k.params])
        out = np.empty(output.shape, output.dtype)
        kernel(*[values[t.name] for t in inputs], out)
        np.testing.assert_allclose(out, interpret(output, values), rtol=1e-4, atol=1e-5)
    assert default.bind(default.default_params()) == default_schedule(make()[1], H100).trace
