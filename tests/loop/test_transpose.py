"""The transposing copy's lowering (loop/transpose.py) and its schedule (schedule/defaults.py): a copy that moves
an axis runs in squares, each full square one call of the helper for its element size, the partial squares at
the edges plain loops, and every form equals NumPy's transpose on shapes with tails on both axes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.kernel import build, lower_kernel, render_kernel
from tilegrad.loop.dot4 import strides
from tilegrad.loop.ir import For, Intrinsic, Store, walk
from tilegrad.loop.tails import version_tails
from tilegrad.loop.transpose import use_transposes
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import Target
from tilegrad.te import expr as E

RNG = np.random.default_rng(0)


def _channels_last(x: te.Tensor) -> te.Tensor:
    n, c, h, w = x.shape
    return te.compute((n, h, w, c), lambda n, h, w, c: x[n, c, h, w], name="nhwc", tag="injective")


def _channels_first(x: te.Tensor) -> te.Tensor:
    n, h, w, c = x.shape
    return te.compute((n, c, h, w), lambda n, c, h, w: x[n, h, w, c], name="nchw", tag="injective")


@settings(max_examples=12, deadline=None)
@given(channels=st.integers(1, 40), width=st.integers(1, 40), dtype=st.sampled_from(["float32", "uint8", "int32"]),
       first=st.booleans())
def test_compiled_transposes_equal_numpys_on_every_tail(channels, width, dtype, first):
    shape = (2, 3, width, channels) if first else (2, channels, 3, width)
    xv = RNG.integers(0, 255, shape).astype(dtype)
    x = te.placeholder(shape, dtype, "x")
    out = (_channels_first if first else _channels_last)(x)
    got = build(default_schedule(out), args=[x, out]).run(xv)
    np.testing.assert_array_equal(got, xv.transpose((0, 3, 1, 2) if first else (0, 2, 3, 1)))


def _calls_and_loops(dtype: str, lanes: int):
    x = te.placeholder((1, 40, 3, 37), dtype, "x")
    kernel = lower_kernel(([x], [_channels_last(x)]), target=Target.with_lanes(lanes))
    lowered = use_transposes(version_tails(kernel))  # as the renderer does: full squares apart from the edges
    calls = [s for s in walk(lowered.body) if isinstance(s, Intrinsic)]
    stores = [s for s in walk(lowered.body) if isinstance(s, Store)]
    return kernel, calls, stores


def test_full_squares_become_calls_of_the_helper_for_their_element_size():
    """40 channels x 37 pixels: 2 x 2 full squares of 16, the partial ones at the edges left as loops."""
    for dtype, lanes, name in [("float32", 16, "transpose_4x16"), ("float32", 8, "transpose_4x8"),
                               ("uint8", 16, "transpose_1x16"), ("uint8", 8, "transpose_1x16")]:
        kernel, calls, stores = _calls_and_loops(dtype, lanes)
        assert calls and {c.name for c in calls} == {name}, (dtype, lanes)
        assert [b.name for b, _ in calls[0].operands] == ["nhwc", "x"]
        assert stores, "the partial squares keep their loops"
    source = render_kernel(kernel, Target.with_lanes(8))
    assert "tg_transpose_1x16(&nhwc[" in source and source.count("#define TG_TRANSPOSES") == 1


def test_a_copy_that_moves_no_axis_is_left_alone():
    x = te.placeholder((4, 40, 37), "float32", "x")
    copy = te.compute(x.shape, lambda a, b, c: x[a, b, c] * 2.0, name="twice", tag="injective")
    kernel = lower_kernel(([x], [copy]), target=Target.with_lanes(16))
    assert use_transposes(kernel) is kernel
    assert any(isinstance(s, For) for s in walk(kernel.body))


def test_a_transpose_seen_through_a_reshape_runs_in_squares():
    """NCHW pixels gathered as rows of channels, a transpose then a reshape inlined into one copy (a transposed
    convolution's product reads them so): the copy is found through the inlined stage and runs in squares."""
    x = te.placeholder((1, 48, 3, 16), "float32", "x")
    nhwc = _channels_last(x)
    rows = te.compute((48, 48), lambda p, c: nhwc[0, p // 16, p % 16, c], name="rows", tag="injective")
    kernel = build(default_schedule(rows, Target.with_lanes(16)), args=[x, rows], target=Target.with_lanes(16))
    assert "tg_transpose_4x16(&" in kernel.source
    xv = RNG.standard_normal((1, 48, 3, 16)).astype(np.float32)
    np.testing.assert_array_equal(kernel.run(xv), xv.transpose(0, 2, 3, 1).reshape(48, 48))


def test_a_reshape_merging_axes_is_read_as_one_axis_under_a_split_that_overshoots():
    """LeViT's feature map [1, 256, 7, 7] read as tokens [1, 49, 256]: the inlined reshape's index over q < 49 is
    q % 7 + q // 7 % 7 * 7, which is q. Split by 16, q is q_0 * 16 + q_1, past 49 in the last tile; simplified only
    then, every element computed those divisions and gathered its operand (14 us, the simple sketch's 3 us).
    Simplified in the compute's axes, the copy is a transpose, and its full squares call the helper."""
    x = te.placeholder((1, 256, 7, 7), "float32", "x")
    tokens = te.compute((1, 256, 49), lambda n, c, q: x[n, c, q // 7 % 7, q % 7], name="tokens", tag="injective")
    out = te.compute((1, 49, 256), lambda n, q, c: tokens[n, c, q], name="t", tag="injective")
    kernel = build(default_schedule(out, Target.with_lanes(16)), args=[x, out], target=Target.with_lanes(16))
    assert "tg_transpose_4x16(&" in kernel.source
    xv = RNG.standard_normal((1, 256, 7, 7)).astype(np.float32)
    np.testing.assert_array_equal(kernel.run(xv), xv.reshape(1, 256, 49).transpose(0, 2, 1))


def test_a_flat_reshape_under_a_split_keeps_reading_its_input_in_order():
    """The same simplification must not lose a merge: [1, 49, 8, 64] read flat as [49, 512] is (0, i0, i1 // 64,
    i1 % 64) in the axes; with i1 split by 16 and fused with i0, those dimensions simplified one by one come out
    as f % 32 // 4 * 64 + f % 4 * 16 + f // 32 * 512, where the whole composite merges to f * 16 (a stream)."""
    x = te.placeholder((1, 49, 8, 64), "float32", "x")
    flat = te.compute((49, 512), lambda i, j: x[(i * 512 + j) // 25088, (i * 512 + j) // 512 % 49,
                                                 (i * 512 + j) // 64 % 8, (i * 512 + j) % 64], name="flat",
                      tag="injective")
    out = te.compute((49, 512), lambda i, j: E.maximum(flat[i, j], E.const(0.0, "float32")), name="relu",
                     tag="elemwise")
    kernel = build(default_schedule(out, Target.with_lanes(16)), args=[x, out], target=Target.with_lanes(16))
    reads = [line for line in kernel.source.splitlines() if "x[" in line]
    assert reads and not any("%" in line or "/" in line for line in reads), reads
    xv = RNG.standard_normal((1, 49, 8, 64)).astype(np.float32)
    np.testing.assert_array_equal(kernel.run(xv), np.maximum(xv.reshape(49, 512), 0))


def _mobilevit_fold(x: te.Tensor) -> te.Tensor:
    """MobileViT's 2 x 2 patches folded back into an image: pixel (h, w) of channel p is patch position
    (h % 2, w % 2) of patch (h // 2, w // 2)."""
    return te.compute((1, 144, 32, 32), lambda n, p, h, w: x[h % 2 * 2 + w % 2, h // 2 * 16 + w // 2, p],
                      name="fold", tag="injective")


def test_a_square_whose_index_is_strided_only_at_its_corner_keeps_its_loops():
    """The fold's read moves 36,864 elements from w = 0 to 1 and 144 from 0 to 2: taken as a square of stride
    36,864 from its first step, the copy read 16 rows past the input's end (a SIGSEGV); it is not a transpose."""
    x = te.placeholder((4, 256, 144), "float32", "x")
    w, r = E.Var("w", lo=0, hi=15), E.Var("r", lo=0, hi=15)
    assert strides(x, (w % 2, w // 2 * 16, r), r, w) == [None, None]
    assert strides(x, (E.const(0), w // 8 * 8 + w % 8, r), r, w) == [1, 144]  # a split loop's two indices: affine
    out = _mobilevit_fold(x)
    kernel = build(default_schedule(out, Target.with_lanes(16)), args=[x, out], target=Target.with_lanes(16))
    xv = RNG.standard_normal((4, 256, 144)).astype(np.float32)
    want = xv.reshape(2, 2, 16, 16, 144).transpose(4, 2, 0, 3, 1).reshape(1, 144, 32, 32)
    np.testing.assert_array_equal(kernel.run(xv), want)
