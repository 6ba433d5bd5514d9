"""The nn op family: each op's samples compiled under the default schedule equal its NumPy reference, its type rule
agrees with the reference, the references agree with torch.nn.functional, and bad inputs get errors that say what
is wrong."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.errors import ShapeError
from tilegrad.ir import lookup
from tilegrad.ir.graph import infer_types
from tilegrad.ir.registry import OPS, Sample, TensorType
from tilegrad.schedule.defaults import default_schedule

NN_OPS = ["conv", "conv_transpose", "matmul", "gemm", "batch_norm", "max_pool", "avg_pool", "global_avg_pool",
          "global_max_pool", "softmax", "log_softmax", "layer_norm", "instance_norm", "lrn"]
lookup("conv")  # importing the op families fills the registry
CASES = [(name, i) for name in NN_OPS for i in range(len(OPS[name].samples))]
POSITIVE = {"batch_norm": {4}}  # inputs that must be positive: the variance


def _arrays(name: str, sample: Sample, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(dtype) for shape, dtype in sample.inputs]
    for i in POSITIVE.get(name, ()):
        arrays[i] = np.abs(arrays[i]) + np.float32(0.5)
    return arrays


def _run(name: str, sample: Sample, arrays: list[np.ndarray]) -> np.ndarray:
    """The op compiled under its default schedule, run on `arrays`."""
    op = OPS[name]
    placeholders = [te.placeholder(shape, dtype, f"in{i}") for i, (shape, dtype) in enumerate(sample.inputs)]
    out = op.compute(*placeholders, **op.bind_attrs(sample.attrs, "test"))
    return build(default_schedule(out), args=placeholders + [out]).run(*arrays)


def _reference(name: str, sample: Sample, arrays: list[np.ndarray]) -> np.ndarray:
    op = OPS[name]
    return op.reference(*arrays, **op.bind_attrs(sample.attrs, "test"))


def test_the_module_declares_exactly_these_ops():
    families = ("tilegrad.ir.ops.nn", "tilegrad.ir.ops.norm")
    declared = {name for name, op in OPS.items() if op.compute.__module__ in families}
    assert declared == set(NN_OPS)


@pytest.mark.parametrize("name,index", CASES)
def test_compiled_compute_matches_reference(name, index):
    sample = OPS[name].samples[index]
    arrays = _arrays(name, sample, index)
    np.testing.assert_allclose(_run(name, sample, arrays), _reference(name, sample, arrays), rtol=1e-4, atol=1e-4,
                               err_msg=f"{name} sample {index}")


@pytest.mark.parametrize("name,index", CASES)
def test_type_rule_matches_reference(name, index):
    op = OPS[name]
    sample = op.samples[index]
    types = op.infer(*(TensorType(shape, dtype) for shape, dtype in sample.inputs),
                     **op.bind_attrs(sample.attrs, "test"))
    want = _reference(name, sample, _arrays(name, sample, index))
    assert [(t.shape, t.dtype) for t in types] == [(want.shape, str(want.dtype))]


# ---- the references against torch.nn.functional ----

def _torch_pads(pads, nd: int) -> list[int]:
    """ONNX pads (all begins, then all ends) as F.pad's (begin, end) pairs from the last axis backwards."""
    pads = pads or [0] * (2 * nd)
    return [p for d in reversed(range(nd)) for p in (pads[d], pads[nd + d])]


def _torch_conv(x, w, b=None, *, strides, pads, dilations, group):
    nd = x.dim() - 2
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    return conv(F.pad(x, _torch_pads(pads, nd)), w, b, strides or 1, 0, dilations or 1, group)


def _torch_conv_transpose(x, w, b=None, *, strides, pads, dilations, group, output_padding):
    """The unpadded transposed convolution, cropped by `pads` and extended with zeros by `output_padding`."""
    nd = x.dim() - 2
    conv = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
    full = conv(x, w, None, strides or 1, 0, 0, group, dilations or 1)
    pads, extra = pads or [0] * (2 * nd), output_padding or [0] * nd
    out = [n - pads[d] - pads[nd + d] + extra[d] for d, n in enumerate(full.shape[2:])]
    full = F.pad(full, [p for d in reversed(range(nd)) for p in (0, extra[d])])
    y = full[(..., *(slice(pads[d], pads[d] + out[d]) for d in range(nd)))]
    return y if b is None else y + b.reshape(-1, *[1] * nd)


def _symmetric(pads, nd: int) -> list[int]:
    return (pads or [0] * (2 * nd))[:nd]


def _torch_max_pool(x, *, kernel_shape, strides, pads, dilations, ceil_mode):
    nd = x.dim() - 2
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
    return pool(x, kernel_shape, strides or 1, _symmetric(pads, nd), dilations or 1, bool(ceil_mode))


def _torch_avg_pool(x, *, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad):
    nd = x.dim() - 2
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
    return pool(x, kernel_shape, strides or 1, _symmetric(pads, nd), bool(ceil_mode), bool(count_include_pad))


def _torch_layer_norm(x, scale=None, bias=None, *, axis, epsilon):
    inner = x.shape[axis % x.dim():]
    scale, bias = (None if p is None else torch.broadcast_to(p, inner) for p in (scale, bias))
    return F.layer_norm(x, inner, scale, bias, epsilon)


TORCH = {
    "conv": _torch_conv,
    "conv_transpose": _torch_conv_transpose,
    "max_pool": _torch_max_pool,
    "avg_pool": _torch_avg_pool,
    "batch_norm": lambda x, scale, bias, mean, var, *, epsilon: F.batch_norm(x, mean, var, scale, bias, False,
                                                                             eps=epsilon),
    "layer_norm": _torch_layer_norm,
    "instance_norm": lambda x, scale, bias, *, epsilon: F.instance_norm(x, weight=scale, bias=bias, eps=epsilon),
    "lrn": lambda x, *, size, alpha, beta, bias: F.local_response_norm(x, size, alpha, beta, bias),
}
EXTRA = [  # beyond the samples: 3-d windows, ceil_mode with and without the padding in the divisor
    ("conv", Sample((((1, 2, 5, 6, 5), "float32"), ((3, 2, 2, 3, 2), "float32"), ((3,), "float32")),
                    {"strides": [1, 2, 1], "pads": [0, 1, 1, 1, 0, 0], "dilations": [2, 1, 1]})),
    ("conv_transpose", Sample((((1, 4, 4, 5), "float32"), ((4, 1, 3, 3), "float32"), ((4,), "float32")),
                              {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1], "group": 4})),
    ("max_pool", Sample((((1, 2, 5, 6, 7), "float32"),),
                        {"kernel_shape": [2, 3, 2], "strides": [2, 2, 2], "pads": [1, 1, 0, 1, 1, 0],
                         "ceil_mode": 1})),
    ("avg_pool", Sample((((1, 2, 8, 7), "float32"),),
                        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1})),
    ("avg_pool", Sample((((2, 3, 10), "float32"),),
                        {"kernel_shape": [4], "strides": [3], "pads": [2, 2], "ceil_mode": 1,
                         "count_include_pad": 1})),
]


def _torch_has(name: str, sample: Sample) -> bool:
    """Whether torch can express the sample: its pools pad both sides alike, and its averages have no dilation; its
    LRN centres an even window one channel later than ONNX."""
    if name == "lrn":
        return sample.attrs["size"] % 2 == 1
    if not name.endswith("_pool"):
        return True
    pads, nd = sample.attrs.get("pads"), len(sample.inputs[0][0]) - 2
    return (pads is None or pads[:nd] == pads[nd:]) and (name == "max_pool" or "dilations" not in sample.attrs)


TORCH_CASES = [(name, s) for name in TORCH for s in OPS[name].samples if _torch_has(name, s)] + EXTRA


@pytest.mark.parametrize("name,sample", TORCH_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(TORCH_CASES)])
def test_reference_matches_torch(name, sample):
    arrays = _arrays(name, sample, 0)
    attrs = OPS[name].bind_attrs(sample.attrs, "test")
    want = TORCH[name](*(torch.from_numpy(a) for a in arrays), **attrs).numpy()
    np.testing.assert_allclose(_reference(name, sample, arrays), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,sample", EXTRA, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXTRA)])
def test_extra_cases_compile_to_the_reference(name, sample):
    arrays = _arrays(name, sample, 1)
    np.testing.assert_allclose(_run(name, sample, arrays), _reference(name, sample, arrays), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("a,b", [((6,), (2, 6, 3)), ((4, 6), (6,))])
def test_matmul_of_a_vector_follows_numpy(a, b):
    sample = Sample(((a, "float32"), (b, "float32")))
    arrays = _arrays("matmul", sample, 0)
    got = _run("matmul", sample, arrays)
    np.testing.assert_allclose(got, arrays[0] @ arrays[1], rtol=1e-4, atol=1e-4)
    assert OPS["matmul"].infer(TensorType(a, "float32"), TensorType(b, "float32"))[0].shape == got.shape


# ---- errors ----

def _t(*shape, dtype="float32") -> TensorType:
    return TensorType(shape, dtype)


ERRORS = [
    ("conv", [_t(1, 3, 8, 8), _t(4, 4, 3, 3)], {}, "weight has 4 input channels per group, but x has 3 channels"),
    ("conv", [_t(1, 4, 8, 8), _t(6, 2, 3, 3)], {"group": 3}, "group=3 must divide both the 4 input and the 6 output"),
    ("conv", [_t(1, 4, 8, 8), _t(6, 4, 3, 3), _t(4)], {}, r"bias must have shape \(6,\)"),
    ("conv", [_t(1, 4, 8, 8), _t(6, 4, 3, 3)], {"pads": [1, 1]}, "pads .* must be 4 integers"),
    ("conv", [_t(1, 4, 2, 8), _t(6, 4, 3, 3)], {}, "spatial dimension 0 has size 2"),
    ("conv", [_t(1, 4, 8, 8, dtype="int32"), _t(6, 4, 3, 3, dtype="int32")], {}, "float dtype"),
    ("conv_transpose", [_t(1, 4, 5, 5), _t(3, 2, 3, 3)], {}, "weight has 3 input channels"),
    ("conv_transpose", [_t(1, 4, 5, 5), _t(4, 2, 3, 3)], {"strides": [2, 2], "output_padding": [2, 0]},
     "output_padding .* must be smaller"),
    ("max_pool", [_t(1, 2, 6, 6)], {}, "kernel_shape is required"),
    ("max_pool", [_t(1, 2, 6, 6)], {"kernel_shape": [3]}, "kernel_shape must be 2 integers"),
    ("max_pool", [_t(1, 2, 6, 6)], {"kernel_shape": [2, 2], "pads": [2, 2, 2, 2]}, "wholly in the padding"),
    ("avg_pool", [_t(1, 2, 6, 6, dtype="int32")], {"kernel_shape": [2, 2]}, "float dtype"),
    ("global_avg_pool", [_t(2, 3)], {}, "at least one spatial axis"),
    ("matmul", [_t(4, 5), _t(6, 3)], {}, "inner extents differ: a has 5 columns, b has 6 rows"),
    ("matmul", [_t(2, 4, 5), _t(3, 5, 2)], {}, "do not broadcast"),
    ("matmul", [_t(5), _t(4)], {}, "inner extents differ"),
    ("gemm", [_t(4, 5), _t(5, 3)], {"trans_a": 1}, r"op\(A\) is 5 x 4, op\(B\) is 5 x 3"),
    ("gemm", [_t(4, 5), _t(5, 3), _t(4)], {}, r"C of shape \(4,\) does not broadcast"),
    ("batch_norm", [_t(2, 3, 4), _t(3), _t(3), _t(4), _t(3)], {}, r"mean must have shape \(3,\)"),
    ("softmax", [_t(2, 3)], {"axis": 2}, "axis 2 is out of range"),
    ("layer_norm", [_t(2, 3, 4), _t(3)], {"axis": 1}, r"scale of shape \(3,\) does not broadcast"),
    ("instance_norm", [_t(2, 3, 4), _t(3), _t(2)], {}, r"bias must have shape \(3,\)"),
]


@pytest.mark.parametrize("name,types,attrs,message", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_bad_inputs_are_shape_errors_naming_the_node(name, types, attrs, message):
    with pytest.raises(ShapeError, match=message) as info:
        infer_types(name, types, attrs, "n0")
    assert str(info.value).startswith(f"node 'n0' ({name}) with inputs ")


def test_compute_checks_what_te_nn_does_not():
    x, w, bias = te.placeholder((1, 4, 8, 8), name="x"), te.placeholder((6, 4, 3, 3), name="w"), te.placeholder(
        (4,), name="b")
    with pytest.raises(ShapeError, match=r"bias must have shape \(6,\)"):
        OPS["conv"].compute(x, w, bias, **OPS["conv"].attrs)
    with pytest.raises(ShapeError, match="kernel_shape is required"):
        OPS["max_pool"].compute(x, **OPS["max_pool"].attrs)


def test_float16_products_accumulate_in_float32():
    """A float16 matmul within ONNX's tolerance of the float32 product rounded once (rounding each step to float16
    misses it in most elements)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((16, 200), (200, 16)))
    got = _run("matmul", Sample((((16, 200), "float16"), ((200, 16), "float16"))), [a, b])
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16), rtol=1e-3)
