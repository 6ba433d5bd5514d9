"""im2col's GEMM shares out its rows where they are enough, else (a 1-D convolution's one row) the row's tiles of
positions, each building its own panel of columns; either way the results equal the reference interpreter's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tilegrad.kernel import build
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import Target
from tilegrad.te import tensor as te
from tilegrad.te.interpret import interpret
from tilegrad.te.nn import im2col


def _conv(height, width, kernel):
    x = te.placeholder((1, 16, height, width), name="x")
    w = te.placeholder((24, 16, *kernel), name="w")
    return [x, w], im2col.im2col_conv2d(x, w, padding=(kernel[0] // 2, kernel[1] // 2), name="y")


def _parallel_loops(sch) -> list[str]:
    gemm = sch.state.stage("y_gemm")
    return [name for name in gemm.leaves if gemm.loops[name].kind == "parallel"]  # a fused loop names its parts


@pytest.mark.parametrize("height, width, kernel, shared", [
    (1, 300, (1, 3), "w_0"),  # one row (Whisper's 1-D convolutions): the row's tiles run in parallel
    (12, 20, (3, 3), "h"),    # rows enough for two threads: the rows run in parallel, each with its columns
])
def test_im2col_shares_out_rows_or_a_row_of_tiles(height, width, kernel, shared):
    inputs, out = _conv(height, width, kernel)
    target = dataclasses.replace(Target.with_lanes(8), cores=2)
    sch = default_schedule(out, target)
    assert any(shared in name for name in _parallel_loops(sch)), sch.trace
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in inputs]
    got = build(sch, args=inputs + [sch.state.outputs[0]]).run(*arrays)
    want = interpret(out, {t.name: a for t, a in zip(inputs, arrays)})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
