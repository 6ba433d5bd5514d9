"""tilegrad: a deep-learning compiler.

    mod = tilegrad.compile("model.onnx")      # a native Module; mod(x) -> outputs
    mod.save("out/"); mod = tilegrad.load("out/")   # or from C: tilegrad.c_include_dir()/tilegrad.h
    tilegrad.tune("model.onnx", db="tune.db", trials=2000)   # then tilegrad.compile(..., db="tune.db")
    q = tilegrad.quantize("model.onnx", batches); q.module(x); q.save("int8.onnx")

Subpackages: `te` (expressions and tensor expressions), `schedule` (schedules as traces), `loop` (loop IR),
`codegen` (C), `runtime` (build, call, time), `ir` (graph IR and op registry), `frontend` (ONNX), `quant`
(int8), `optim` (THOR, a PyTorch optimizer).
The package imports nothing until used (timing workers import it, and every import costs them start-up time)
but the backend table, whose rows import their pieces when first asked for them.
"""

from . import backends as _backends  # noqa: F401  (fills the table `backend.backend_for` reads)


def __getattr__(name):
    if name == "__version__":  # the installed distribution's
        from importlib.metadata import version

        return version("tilegrad")
    if name in ("compile", "load", "c_include_dir"):
        from . import api

        return getattr(api, name)
    if name == "CompileOptions":  # how to compile, as one value: tilegrad.compile(model, options=...)
        from .options import CompileOptions

        return CompileOptions
    if name == "quantize":  # post-training int8 quantization (the subpackage `tilegrad.quant` holds QAT too)
        from .quant import quantize

        return quantize
    if name in ("tune", "optim", "quant"):  # subpackages; tune is callable: tilegrad.tune(model, db=..., trials=N)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tilegrad' has no attribute {name!r}")
