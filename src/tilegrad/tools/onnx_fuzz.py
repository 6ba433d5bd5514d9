"""Mutation fuzzing of the ONNX frontend: small valid models, mutated as broken exporters and hostile files are,
then imported and compiled, each outcome classified.

A case is a seed model (`SEEDS`) under one to three mutations (`MUTATIONS`: dims, dtypes, attributes, edges, names,
initializers, external-data locations, opsets, op types, shape constants, constants computed at import, duplicates),
drawn from a generator seeded with the case number, so case N is the same model on every machine. `run_case` runs it
through the stages asked for: `import` (the ONNX frontend), `compile` (graph passes, then every kernel lowered and
rendered to C, no C compiler) and `run` (a native build, a call on random inputs). The outcome is `ok`, `tilegrad
error` (a `TilegradError`: the model was refused with a message), `wrapped exception` (refused, but by the import's
safety net around a node's conversion, which turns any other exception into a `ModelFormatError`: a refusal, not a
bug the user sees, but a message that could be clearer), `other exception` (a bug: any other exception), or, from
the process that runs it (`benchmarks/fuzz_onnx.py`), `crash` or `timeout`. A model that reads external data from
outside its directory and still imports is `hostile accepted`; one that runs but whose outputs differ from ONNX
Runtime's on the same inputs is `mismatch`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..errors import TilegradError

OUTCOMES = ("ok", "tilegrad error", "wrapped exception", "other exception", "crash", "timeout", "hostile accepted",
            "mismatch")
STAGES = ("import", "compile", "run")


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, inits, opset=17):
    g = helper.make_graph(nodes, "fuzz", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _mlp():
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="matmul"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["z"], name="gemm", transB=1, alpha=0.5),
             helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1)]
    inits = [_init("w1", rng.standard_normal((8, 16)).astype("float32")), _init("b1", np.ones(16, "float32")),
             _init("w2", rng.standard_normal((4, 16)).astype("float32")), _init("b2", np.zeros(4, "float32"))]
    return _model(nodes, [_vi("x", [2, 8])], [_vi("y", [2, 4])], inits)


def _cnn():
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["p", "shape"], ["f"], name="flatten", allowzero=1),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], name="fc", transB=1)]
    inits = [_init("w", rng.standard_normal((4, 3, 3, 3)).astype("float32")), _init("b", np.zeros(4, "float32")),
             _init("shape", np.array([1, 64], "int64")),
             _init("fc", rng.standard_normal((10, 64)).astype("float32")), _init("fb", np.ones(10, "float32"))]
    return _model(nodes, [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 10])], inits, opset=18)


def _shapes():
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze"),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], name="concat_shape", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["f"], name="reshape"),
             helper.make_node("Transpose", ["f"], ["t"], name="transpose", perm=[1, 0]),
             helper.make_node("Slice", ["t", "starts", "ends", "slice_axes"], ["sl"], name="slice"),
             helper.make_node("Concat", ["sl", "sl"], ["y"], name="concat", axis=1)]
    inits = [_init("zero", np.array(0, "int64")), _init("axes", np.array([0], "int64")),
             _init("minus1", np.array([-1], "int64")), _init("starts", np.array([1], "int64")),
             _init("ends", np.array([10], "int64")), _init("slice_axes", np.array([0], "int64"))]
    return _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", [9, 4])], inits)


def _chain():
    nodes = [helper.make_node("Mod", ["seven", "three"], ["m"], name="const_mod"),
             helper.make_node("Cast", ["m"], ["mf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "mf"], ["a"], name="add"),
             helper.make_node("Mul", ["a", "a"], ["b"], name="mul"),
             helper.make_node("Sigmoid", ["b"], ["c"], name="sigmoid"),
             helper.make_node("Tanh", ["c"], ["d"], name="tanh"),
             helper.make_node("Clip", ["d", "lo", "hi"], ["e"], name="clip"),
             helper.make_node("Sub", ["e", "x"], ["f"], name="sub"),
             helper.make_node("Abs", ["f"], ["g"], name="abs"),
             helper.make_node("Sqrt", ["g"], ["y"], name="sqrt")]
    inits = [_init("seven", np.array(7, "int64")), _init("three", np.array(3, "int64")),
             _init("lo", np.array(0.1, "float32")), _init("hi", np.array(0.9, "float32"))]
    return _model(nodes, [_vi("x", [3, 5])], [_vi("y", [3, 5])], inits)


def _broadcast():
    nodes = [helper.make_node("Expand", ["x", "eshape"], ["e"], name="expand"),
             helper.make_node("Tile", ["e", "repeats"], ["t"], name="tile"),
             helper.make_node("Pad", ["t", "pads"], ["p"], name="pad", mode="constant"),
             helper.make_node("Greater", ["p", "zerof"], ["mask"], name="greater"),
             helper.make_node("Where", ["mask", "p", "zerof"], ["w"], name="where"),
             helper.make_node("ReduceMean", ["w", "raxes"], ["rm"], name="mean", keepdims=1),
             helper.make_node("Gather", ["rm", "idx"], ["gt"], name="gather", axis=1),
             helper.make_node("Split", ["gt", "split"], ["s0", "s1"], name="split", axis=1),
             helper.make_node("Add", ["s0", "s1"], ["y"], name="add")]
    inits = [_init("eshape", np.array([2, 3, 4], "int64")), _init("repeats", np.array([1, 1, 2], "int64")),
             _init("pads", np.array([0, 0, 1, 0, 0, 1], "int64")), _init("zerof", np.array(0.0, "float32")),
             _init("raxes", np.array([-1], "int64")), _init("idx", np.array([2, 0], "int64")),
             _init("split", np.array([1, 1], "int64"))]
    return _model(nodes, [_vi("x", [2, 1, 4])], [_vi("y", [2, 1, 1])], inits, opset=18)


def _norm():
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["ln"], name="ln", axis=-1),
             helper.make_node("Transpose", ["ln"], ["t"], name="transpose", perm=[0, 2, 1]),
             helper.make_node("Unsqueeze", ["t", "uaxes"], ["u"], name="unsqueeze"),
             helper.make_node("BatchNormalization", ["u", "s", "b", "mean", "var"], ["bn"], name="bn"),
             helper.make_node("GlobalAveragePool", ["bn"], ["gap"], name="gap"),
             helper.make_node("Flatten", ["gap"], ["y"], name="flatten", axis=1)]
    inits = [_init("scale", rng.uniform(0.5, 1.5, 6).astype("float32")), _init("bias", np.zeros(6, "float32")),
             _init("uaxes", np.array([3], "int64")),
             *(_init(n, rng.uniform(0.5, 1.5, 6).astype("float32")) for n in ("s", "b", "mean", "var"))]
    return _model(nodes, [_vi("x", [2, 4, 6])], [_vi("y", [2, 6])], inits)


def _attention():
    rng = np.random.default_rng(4)
    mask = np.tril(np.ones((4, 4), bool))
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"], name="project"),
             helper.make_node("Reshape", ["q", "heads"], ["qh"], name="split_heads"),
             helper.make_node("Transpose", ["qh"], ["qt"], name="heads_first", perm=[0, 2, 1, 3]),
             helper.make_node("Einsum", ["qt", "qt"], ["s"], name="scores", equation="bhqd,bhkd->bhqk"),
             helper.make_node("Mul", ["s", "scale"], ["ss"], name="scale"),
             helper.make_node("Where", ["mask", "ss", "neg"], ["masked"], name="causal"),
             helper.make_node("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
             helper.make_node("MatMul", ["p", "qt"], ["o"], name="context"),
             helper.make_node("Transpose", ["o"], ["ot"], name="heads_back", perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["ot", "merged"], ["y"], name="merge_heads")]
    inits = [_init("wq", rng.standard_normal((8, 8)).astype("float32")),
             _init("heads", np.array([1, 4, 2, 4], "int64")), _init("scale", np.array(0.5, "float32")),
             _init("mask", mask), _init("neg", np.array(-1e9, "float32")),
             _init("merged", np.array([1, 4, 8], "int64"))]
    return _model(nodes, [_vi("x", [1, 4, 8])], [_vi("y", [1, 4, 8])], inits)


def _upsample():
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["c"], name="deconv", strides=[2, 2], pads=[1, 1, 1, 1],
                              output_padding=[1, 1]),
             helper.make_node("Resize", ["c", "", "scales"], ["r"], name="resize", mode="nearest"),
             helper.make_node("AveragePool", ["r"], ["a"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Concat", ["a", "a"], ["cat"], name="concat", axis=1),
             helper.make_node("LeakyRelu", ["cat"], ["y"], name="leaky", alpha=0.1)]
    inits = [_init("w", rng.standard_normal((2, 3, 3, 3)).astype("float32")),
             _init("scales", np.array([1, 1, 0.5, 0.5], "float32"))]
    return _model(nodes, [_vi("x", [1, 2, 4, 4])], [_vi("y", [1, 6, 2, 2])], inits)


SEEDS: dict[str, Callable[[], onnx.ModelProto]] = {"mlp": _mlp, "cnn": _cnn, "shapes": _shapes, "chain": _chain,
                                                   "broadcast": _broadcast, "norm": _norm, "attention": _attention,
                                                   "upsample": _upsample}


@dataclasses.dataclass
class Case:
    """One fuzz case: the model, the files to write beside it (external data) and above it, what was done."""

    number: int
    model: onnx.ModelProto
    mutations: list[str]
    beside: dict[str, bytes] = dataclasses.field(default_factory=dict)  # files next to the model
    outside: dict[str, bytes] = dataclasses.field(default_factory=dict)  # files in the directory above it
    hostile: bool = False  # reads external data from outside its directory: must be refused


@dataclasses.dataclass(frozen=True)
class Outcome:
    kind: str  # one of OUTCOMES
    stage: str  # the stage it ended in
    error: str = ""  # the exception's class
    message: str = ""
    mutations: str = ""  # what the case did to its seed model


def make_case(number: int) -> Case:
    """Case `number`: a seed model under one to three mutations, the same on every run."""
    rng = np.random.default_rng(number)
    seed = list(SEEDS)[number % len(SEEDS)]
    case = Case(number, SEEDS[seed](), [seed])
    from .onnx_mutations import MUTATIONS

    for _ in range(int(rng.integers(1, 4))):
        kind = list(MUTATIONS)[int(rng.integers(len(MUTATIONS)))]
        case.mutations.append(f"{kind}: {MUTATIONS[kind](case, rng)}")
    return case


def write_case(case: Case, directory: Path) -> Path:
    """The case's model and files under `directory` (model in `directory/model/`); the model's path."""
    model_dir = directory / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    for name, data in case.outside.items():
        (directory / name).write_bytes(data)
    for name, data in case.beside.items():
        (model_dir / name).write_bytes(data)
    path = model_dir / "model.onnx"
    path.write_bytes(case.model.SerializeToString())
    return path


def run_case(case: Case, directory: Path, stages: tuple[str, ...] = ("import", "compile")) -> Outcome:
    """Run the case's model (written under `directory`) through `stages`; the outcome of the last one reached."""
    path = write_case(case, directory)
    stage, done = "import", "; ".join(case.mutations)
    try:
        from ..frontend.onnx import import_error, read_onnx

        graph, problems = read_onnx(path)
        for p in problems:
            cause = p.error.__cause__
            if cause is not None and not isinstance(cause, TilegradError):
                return Outcome("wrapped exception", stage, type(cause).__name__, _line(p.error), done)
        if problems:
            raise import_error(problems)
        if case.hostile:
            return Outcome("hostile accepted", stage, mutations=done)
        if "compile" in stages:
            stage = "compile"
            _lower_all(graph)
        if "run" in stages:
            stage = "run"
            problem = _build_and_run(path, graph)
            if problem:
                return Outcome("mismatch", stage, message=problem, mutations=done)
    except TilegradError as exc:
        return Outcome("tilegrad error", stage, type(exc).__name__, _line(exc), done)
    except Exception as exc:  # noqa: BLE001  (the fuzzer's job: count it, go on)
        return Outcome("other exception", stage, type(exc).__name__, _line(exc), done)
    return Outcome("ok", stage, mutations=done)


def _lower_all(graph) -> None:
    """The graph passes, then every kernel lowered and rendered to C, as `compile` does before the C compiler."""
    from ..kernel import lower_kernel, render_kernel
    from ..passes import optimize
    from ..passes.memory_plan import intermediates_of, plan_memory
    from ..target import host

    target = host()
    g, _ = optimize(graph, 2, target=target)
    plan = plan_memory(g, intermediates_of(g))
    for t, node in enumerate(plan.kernel_nodes(g)):
        render_kernel(lower_kernel(node, name=f"k{t}", target=target), target)


def _build_and_run(path: Path, graph) -> str | None:
    """Build the module and call it once on random inputs of the graph's input types; how its outputs differ from
    ONNX Runtime's (None when they agree, or when ONNX Runtime refuses the model)."""
    import tilegrad

    rng = np.random.default_rng(0)
    mod = tilegrad.compile(path)
    inputs = {v.name: (rng.standard_normal(v.shape) if v.dtype.startswith("float") else np.zeros(v.shape))
              .astype(v.dtype) for v in graph.inputs}
    got = mod(**inputs)
    got = got if isinstance(got, list) else [got]
    try:
        import onnxruntime as ort

        ort.set_default_logger_severity(4)  # mutated models make it warn at length
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)
    except Exception:  # noqa: BLE001  (ONNX Runtime refusing a mutated model is no finding)
        return None
    for name, g, w in zip(mod.output_names, got, want):
        same = g.shape == w.shape and g.dtype == w.dtype and np.allclose(
            g.astype("float64"), w.astype("float64"), rtol=1e-3, atol=1e-4, equal_nan=True)
        if not same:
            return (f"output {name!r}: tilegrad's {g.dtype}{list(g.shape)} differs from ONNX Runtime's "
                    f"{w.dtype}{list(w.shape)}")
    return None


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
