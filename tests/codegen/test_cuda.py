"""The CUDA renderer without a GPU: a golden tiny kernel, every expression node spelled and compiled by NVRTC,
and every catalogue workload under the default GPU rules compiled to PTX and, rendered serially as C (the same
loop IR after the GPU rewrites, each bound loop a plain loop), equal to the interpreter's numbers."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilegrad import metrics, te
from tilegrad.codegen.c import CRenderer
from tilegrad.codegen.cuda import CudaRenderer
from tilegrad.errors import BuildError, LoweringError
from tilegrad.loop import lower
from tilegrad.loop.gpu import rewrite_for_gpu
from tilegrad.runtime.build import build
from tilegrad.runtime.kernel import BufferSpec, Kernel
from tilegrad.runtime.nvrtc import compile_ptx
from tilegrad.schedule import Schedule
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import GPUS
from tilegrad.te import expr as E
from tilegrad.te.interpret import interpret
from tilegrad.workloads import WORKLOADS

H100 = GPUS["sm_90"]


def _add_exp():
    a = te.placeholder((4, 8), name="A")
    b = te.placeholder((8,), name="B")
    c = te.compute((4, 8), lambda i, j: te.exp(a[i, j]) + b[j], name="C")
    sch = Schedule(c)
    sch.bind("C", "i", "blockIdx.x")
    j0, j1 = sch.split("C", "j", 4)
    sch.bind("C", j1, "threadIdx.x")
    sch.unroll("C", j0)
    return lower(sch.state, "add")


def test_golden_tiny_kernel():
    assert CudaRenderer(H100).render_function(_add_exp()) == """\
extern "C" __global__ void __launch_bounds__(4) add(float* __restrict__ A, float* __restrict__ B, float* __restrict__ C) {
  {
    const int64_t i = (int64_t)blockIdx.x;
    #pragma unroll
    for (int64_t j_0 = 0; j_0 < 2; ++j_0) {
      {
        const int64_t j_1 = (int64_t)threadIdx.x;
        C[((i * 8) + (j_0 * 4) + j_1)] = (__expf(A[((i * 8) + (j_0 * 4) + j_1)]) + B[((j_0 * 4) + j_1)]);
      }
    }
  }
}
"""


def test_a_loop_shorter_than_its_axis_is_guarded():
    a = te.placeholder((6,), name="A")
    b = te.compute((6,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((4,), lambda i: a[i] + 1.0, name="C")
    sch = Schedule([b, c])
    sch.bind("B", "i", "threadIdx.x")
    sch.bind("C", "i", "threadIdx.x")
    src = CudaRenderer(H100).render_function(lower(sch.state, "two"))
    assert "__launch_bounds__(6)" in src
    assert src.count("if (") == 1
    assert src.index("C[i] = ") > src.index("if (i < 4) {") > src.index("const int64_t i = (int64_t)threadIdx.x;")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_every_math_call_compiles_with_nvrtc(dtype):
    r = CudaRenderer(H100)
    assert set(r.calls) == set(E.MATH_CALLS)
    x = te.placeholder((32,), dtype, name="x")
    outs = [_call(cls, x) for cls in E.MATH_CALLS]
    n = te.placeholder((32,), "int32", name="n")
    outs.append(te.compute((32,), lambda i: te.select(n[i] // 3 < n[i] % 5, E.maximum(n[i], 2), E.minimum(n[i], 7)),
                           name="z"))
    sch = Schedule(outs)
    for t in outs:
        sch.bind(t.name, "i", "threadIdx.x")
    compile_ptx(r.render(lower(sch.state, f"calls_{dtype}")), "sm_90")


def _call(cls, x):
    return te.compute(x.shape, lambda i: cls(x[i]) if cls.arity == 1 else cls(x[i], x[i]),
                      name=f"y_{cls.__name__.lower()}")


def test_nvrtc_errors_name_the_kernel_and_line():
    with pytest.raises(BuildError, match=r"(?s)NVRTC failed on broken\.cu.*broken\.cu\(1\).*undefined"):
        compile_ptx('extern "C" __global__ void k(float* a) { a[0] = undefined_name; }', "sm_90", name="broken.cu")


def test_ptx_is_cached_by_source_hash(tmp_path):
    from tilegrad import config

    source = CudaRenderer(H100).render(_add_exp())
    with config.override(cache_dir=tmp_path):
        metrics.reset()
        first = compile_ptx(source, "sm_90")
        second = compile_ptx(source, "sm_90")
        assert first == second and ".entry add" in first
        assert metrics.counters["build.nvrtc_compiled"] == 1 and metrics.counters["build.cache_hit"] == 1
        assert list(tmp_path.glob("*/*.ptx")) and list(tmp_path.glob("*/*.cu"))


def test_a_global_temporary_is_refused():
    a = te.placeholder((4,), name="A")
    b = te.compute((4,), lambda i: a[i] + 1.0, name="B")
    c = te.compute((4,), lambda i: b[3 - i], name="C")
    sch = Schedule(c)
    sch.bind("C", "i", "threadIdx.x")  # B is computed at the root: other threads read what one wrote
    with pytest.raises(LoweringError, match="buffer B is a global temporary"):
        CudaRenderer(H100).render(lower(sch.state, "k"))
    one_thread = CudaRenderer(H100).render_function(lower(Schedule(c).state, "k"))
    assert "float B[4];" in one_thread  # a kernel of one thread keeps it as its own array


def _inputs(inputs, rng):
    return {t.name: rng.integers(0, 3, t.shape).astype(t.dtype) if t.name.startswith("idx")
            else rng.standard_normal(t.shape).astype(t.dtype) for t in inputs}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_under_gpu_rules_compiles_to_ptx_and_matches_the_interpreter(name):
    inputs, output = WORKLOADS[name]()
    sch = default_schedule(output, H100)
    k = lower(sch.state, name, inputs + [sch.state.outputs[0]])
    ptx = compile_ptx(CudaRenderer(H100).render(k), H100.arch)
    assert f".entry {name}" in ptx
    values = _inputs(inputs, np.random.default_rng(0))
    kernel = Kernel(build(CRenderer().render(rewrite_for_gpu(k))), name,
                    [BufferSpec(b.name, tuple(int(d.value) for d in b.shape), b.dtype) for b in k.params])
    out = np.empty(output.shape, output.dtype)
    kernel(*[values[t.name] for t in inputs], out)
    np.testing.assert_allclose(out, interpret(output, values), rtol=1e-4, atol=1e-5)


def test_every_registered_op_compiles_to_ptx():
    """Each op of the registry on its first sample under the GPU rules, all kernels in one NVRTC unit (as a model
    is compiled); a failure names the op, or NVRTC's log names the kernel (`<op>_0`) and line."""
    from tilegrad.codegen.cuda import PRELUDE
    from tilegrad.ir import lookup
    from tilegrad.ir.registry import OPS

    lookup("add")  # importing the op families fills the registry
    renderer, functions = CudaRenderer(H100), []
    for name in sorted(OPS):
        op = OPS[name]
        sample = op.samples[0]
        placeholders = [te.placeholder(shape, dtype, f"in{i}") for i, (shape, dtype) in enumerate(sample.inputs)]
        out = op.compute(*placeholders, **op.bind_attrs(sample.attrs, "test"))
        sch = default_schedule(out, H100)
        try:
            functions.append(renderer.render_function(lower(sch.state, f"{name}_0",
                                                            placeholders + list(sch.state.outputs))))
        except Exception as exc:
            raise AssertionError(f"op {name}: {type(exc).__name__}: {exc}") from exc
    ptx = compile_ptx(PRELUDE + "\n".join(functions), H100.arch, name="registry.cu")
    assert ptx.count(".entry ") == len(OPS)


def test_aligned_fetches_load_float4_and_the_rest_stay_scalar():
    from tilegrad.te import nn

    a, b = te.placeholder((128, 64), name="A"), te.placeholder((64, 128), name="B")
    sch = default_schedule(nn.matmul(a, b, name="C"), H100)
    src = CudaRenderer(H100).render(lower(sch.state, "mm", [a, b, sch.state.outputs[0]]))
    assert src.count("*(float4*)&A_shared[") == 1 and src.count("*(float4*)&B_shared[") == 1
    assert "__shared__ __align__(16) float A_shared[256];" in src
    ptx = compile_ptx(src, H100.arch)
    assert re.search(r"ld\.global(\.nc)?\.v4\.", ptx) and re.search(r"st\.shared\.v4\.", ptx)
    inputs, output = WORKLOADS["matmul_64x48x40"]()  # 40 columns: B's tiles overshoot, its fetch is guarded
    sch = default_schedule(output, H100)
    src = CudaRenderer(H100).render(lower(sch.state, "mm", inputs + [sch.state.outputs[0]]))
    assert "*(float4*)&B_shared[" not in src and "#pragma unroll" in src
