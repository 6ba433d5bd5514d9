"""The backend table: one row per kind of target, the only place where a CPU and a CUDA GPU are told apart.

Each row names, per layer, the piece that kind uses: its renderer (codegen), default rules and sketch rules
(schedule), feature set, records fingerprint and measurer (tune), executor. The pieces are imported when first
asked for, so importing the package stays cheap (timing workers import it). `backend.backend_for(target)` reads
the table; adding a kind of target is adding a row here.
"""

from __future__ import annotations

from .backend import register_backend


class CpuBackend:
    """C with OpenMP for this machine's cores, built by the system compiler."""

    kind = "cpu"
    gpu_features = False
    chooses_graph = True
    fuses_attention = True
    remote_measurers = True
    saves_module = True
    symbolic_dims = True

    def renderer(self, target):
        from .codegen.c import CRenderer

        return CRenderer(target)

    def build(self, sources, target, cfg):
        from .runtime.build import build, build_many

        return build(sources[0], cfg=cfg) if len(sources) == 1 else build_many(sources, cfg=cfg)

    def default_schedule(self, outputs, target, knobs, rules):
        from .schedule.defaults import cpu_schedule

        return cpu_schedule(outputs, target, knobs, rules)

    def sketches(self, outputs, target, limit):
        from .schedule.sketch import cpu_sketches

        return cpu_sketches(outputs, target, limit)

    def fingerprint(self, target, cfg):
        from .tune.records import machine_fingerprint

        return machine_fingerprint(cfg)

    def require_device(self) -> None:
        return None  # the CPU that compiles is the one that runs

    def measurer(self, target):
        from .tune.measure import Measurer

        return Measurer()

    def compile_graph(self, graph, cfg, choose, target):
        from .executor import compile_graph

        return compile_graph(graph, cfg, choose, target)


class CudaBackend:
    """CUDA C++ compiled to PTX by NVRTC (no GPU needed for that), run on the first CUDA device."""

    kind = "cuda"
    gpu_features = True
    chooses_graph = False  # algorithms and fusion plans are CPU choices
    # no GPU schedule tiles a fused attention (one output a thread: 1.8 ms a layer of BERT on an H200, 80% of the
    # model), where its batch products and row softmax each have one (docs/cuda.md)
    fuses_attention = False
    remote_measurers = False  # Ray devices are CPUs
    saves_module = False  # a CudaModule lives on its device; the CUDA source and PTX are what is written
    symbolic_dims = False  # its kernels are generated for fixed shapes

    def renderer(self, target):
        from .codegen.cuda import CudaRenderer

        return CudaRenderer(target)

    def build(self, sources, target, cfg):
        from .runtime.nvrtc import compile_ptx

        return compile_ptx("\n".join(sources), target.arch, cfg=cfg)

    def default_schedule(self, outputs, target, knobs, rules):
        from .schedule.rules_gpu import gpu_schedule

        return gpu_schedule(outputs, target, knobs)

    def sketches(self, outputs, target, limit):
        from .schedule.sketch_gpu import gpu_sketches

        return gpu_sketches(outputs, target)[:limit]

    def fingerprint(self, target, cfg):
        from .runtime.nvrtc import version  # NVRTC is loaded only where GPU records are read or written

        return f"cuda; {target.model}; {target.arch}; nvrtc {version()}"

    def require_device(self) -> None:
        from .tune.measure.cuda import require_device

        require_device()

    def measurer(self, target):
        from .tune.measure import Measurer
        from .tune.measure.cuda import CudaBuilder, CudaRunner

        return Measurer(runner=CudaRunner(), builder=CudaBuilder(target))

    def compile_graph(self, graph, cfg, choose, target):
        from .cuda_executor import compile_graph

        return compile_graph(graph, cfg, choose, target)


register_backend(CpuBackend())
register_backend(CudaBackend())
