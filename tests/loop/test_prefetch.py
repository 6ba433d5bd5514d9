"""The prefetch lowering (loop/prefetch.py): a long reduction loop that moves a read-only parameter's index by a
cache line or more per iteration prefetches the lines DISTANCE iterations ahead, one call per distinct line of its
inner loops; so does a nest of short loops that reads one contiguous stream (a direct convolution's weights);
short loops, written buffers and reads that move less than a line per step are left alone; and the compiled
product and convolution with the prefetches equal NumPy's."""

from __future__ import annotations

import numpy as np

from tilegrad import te
from tilegrad.te import nn
from tilegrad.te.nn.nchwc import conv2d_nchwc
from tilegrad.ir import lookup
from tilegrad.kernel import build, lower_kernel
from tilegrad.loop.dot4 import use_dot4
from tilegrad.dtype import itemsize
from tilegrad.loop.ir import Allocate, For, IfThenElse, Intrinsic, Kernel, Seq, Store, walk
from tilegrad.loop.prefetch import DISTANCE, MAX_LINES, PREFETCH, PREFETCH_L2, prefetch_streams
from tilegrad.te import expr as E
from tilegrad.te.evaluate import evaluate
from tilegrad.target import Target

M, K, N = 20, 256, 96


def _panel_gemm(target: Target):
    """A @ W with W packed in panels of two of the target's vectors (te.nn.panel_matmul's packed operand), lowered
    under the default rules."""
    nr = 2 * target.vector_lanes
    phs = [te.placeholder((M, K), "float32", "a"), te.placeholder((N // nr, K, nr), "float32", "w")]
    out = nn.panel_matmul(*phs, N, mr=6, name="C")
    return phs, out, lower_kernel((phs, [out]), target=target)


def _prefetches(k: Kernel) -> list[Intrinsic]:
    return [s for s in walk(k.body) if isinstance(s, Intrinsic) and s.name == PREFETCH]


def test_the_gemms_panel_is_prefetched_ahead_one_call_per_line():
    target = Target.with_lanes(8)
    _, _, loop = _panel_gemm(target)
    calls = _prefetches(prefetch_streams(loop))
    assert calls and {b.name for c in calls for b, _ in c.operands} == {"w"}  # not A: it moves 24 bytes a step
    reduction = next(s for s in walk(prefetch_streams(loop).body)
                     if isinstance(s, For) and isinstance(s.body, Seq) and isinstance(s.body.stmts[0], Intrinsic))
    assert reduction.kind == "serial" and reduction.extent.value == K
    assert len(_prefetches(reduction)) == 1  # a panel row of 16 float32s: one line
    (_, indices), = reduction.body.stmts[0].operands
    moved = [str(i) for i in indices]
    assert any(f"{reduction.var.name} + {DISTANCE}" in text or f"{DISTANCE} + {reduction.var.name}" in text
               for text in moved), moved


def test_short_loops_and_written_buffers_are_left_alone():
    x = te.placeholder((8, 32), name="X")
    r = te.reduce_axis(32, "r")
    short = te.compute((8,), lambda i: te.sum(x[i, r] * 2.0, axis=r), name="S")  # a loop of 32 steps
    loop = lower_kernel(([x], [short]), target=Target.with_lanes(8))
    assert prefetch_streams(loop) is loop
    _, _, gemm = _panel_gemm(Target.with_lanes(8))
    written = {s.buffer for s in walk(gemm.body) if isinstance(s, Store)}
    assert not {b for c in _prefetches(prefetch_streams(gemm)) for b, _ in c.operands} & written


def test_a_wider_panel_row_is_prefetched_line_by_line():
    """Panels of 32 float32s (two AVX-512 vectors): 128 bytes a step, two lines, two calls a line apart."""
    _, _, loop = _panel_gemm(Target.with_lanes(16))
    calls = _prefetches(prefetch_streams(loop))
    assert len(calls) == 2 and MAX_LINES >= 2
    (_, first), (_, second) = (c.operands[0] for c in calls)
    assert [str(i) for i in first[:2]] == [str(i) for i in second[:2]]
    assert {str(first[2]), str(second[2])} == {"0", "16"}


def test_the_compiled_product_with_prefetches_equals_numpy():
    phs, out, _ = _panel_gemm(Target.with_lanes(8))
    built = build(([*phs], [out]), target=Target.with_lanes(8))
    assert "__builtin_prefetch(&w[" in built.source
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype("float32")
    w = rng.standard_normal((K, N)).astype("float32")
    nr = phs[1].shape[2]
    packed = np.ascontiguousarray(w.reshape(K, N // nr, nr).transpose(1, 0, 2))
    got = np.zeros((M, N), "float32")
    built(a, packed, got)
    np.testing.assert_allclose(got, a @ w, rtol=1e-4, atol=1e-4)


def _blocked_conv(target: Target):
    """A 3 x 3 convolution in NCHW16c, 64 -> 32 channels: its weights (O / 16, C, 3, 3, 16) are read in the order
    of its reduction loops, input channel by tap, one 64-byte vector a step: 576 steps in loops of 3 to 64."""
    x, w = te.placeholder((1, 4, 9, 9, 16), "float32", "x"), te.placeholder((2, 64, 3, 3, 16), "float32", "w")
    out = conv2d_nchwc(x, w, padding=1, name="Y")
    return [x, w], out, lower_kernel(([x, w], [out]), target=target)


def test_a_convolutions_weights_are_prefetched_along_its_reduction_nest():
    _, _, loop = _blocked_conv(Target.with_lanes(16))
    calls = _prefetches(prefetch_streams(loop))
    assert calls and {b.name for c in calls for b, _ in c.operands} == {"w"}  # the input moves 4 bytes a step
    innermost = next(s for s in walk(prefetch_streams(loop).body)
                     if isinstance(s, For) and isinstance(s.body, Seq) and isinstance(s.body.stmts[0], Intrinsic))
    assert innermost.kind == "serial" and innermost.extent.value < 64  # a window's columns, not a long loop
    assert all(any(f"{innermost.var.name} + {DISTANCE}" in str(i) or f"{DISTANCE} + {innermost.var.name}" in str(i)
                   for i in c.operands[0][1]) for c in calls)


def test_the_compiled_convolution_with_prefetches_equals_numpy():
    target = Target.with_lanes(8)
    phs, out, _ = _blocked_conv(target)
    built = build((phs, [out]), target=target)
    assert "__builtin_prefetch(&w[" in built.source
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 64, 9, 9)).astype("float32")
    w = rng.standard_normal((32, 64, 3, 3)).astype("float32")
    blocked = np.ascontiguousarray(x.reshape(1, 4, 16, 9, 9).transpose(0, 1, 3, 4, 2))
    packed = np.ascontiguousarray(w.reshape(2, 16, 64, 3, 3).transpose(0, 2, 3, 4, 1))
    got = np.zeros((1, 2, 9, 9, 16), "float32")
    built(blocked, packed, got)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 32, 9, 9), "float32")
    for ky in range(3):
        for kx in range(3):
            want += np.einsum("nchw,oc->nohw", padded[:, :, ky:ky + 9, kx:kx + 9], w[:, :, ky, kx])
    np.testing.assert_allclose(got.transpose(0, 1, 4, 2, 3).reshape(1, 32, 9, 9), want, rtol=1e-4, atol=1e-3)


def test_an_int8_gemms_weights_are_prefetched_through_the_dot_product():
    """The int8 GEMM's tile reads its packed weights through the dot-product intrinsic's address (loop/dot4.py):
    those addresses stream 64 bytes a k group and are prefetched, one call per column panel; the sums the
    intrinsic writes and A's 4 bytes a step are not."""
    op = lookup("quantized_matmul")
    m, k, n = 24, 512, 64  # 128 k groups, 4 panels of 16
    phs = [te.placeholder((m, k), "uint8", "a"), te.placeholder((n // 16, k // 4, 16, 4), "int8", "w"),
           te.placeholder((n,), "int32", "bias")]
    out = op.compute(*phs, **op.bind_attrs({"n": n, "out_dtype": "int32"}, "test"))
    target = Target(flags=frozenset({"avx512f", "avx512_vnni"}), vector_bits=512)
    loop = use_dot4(lower_kernel((phs, [out]), target=target))
    calls = _prefetches(prefetch_streams(loop))
    assert {b.name for c in calls for b, _ in c.operands} == {"w"}
    assert len(calls) == n // 16


def _path_to(stmt, target, loops=()):
    """The loops around `target` inside `stmt`, outermost first; None where it is not there."""
    if stmt is target:
        return loops
    if isinstance(stmt, For):
        return _path_to(stmt.body, target, (*loops, stmt))
    children = stmt.stmts if isinstance(stmt, Seq) else [getattr(stmt, n) for n in ("body", "then", "orelse")
                                                         if getattr(stmt, n, None) is not None]
    return next((found for c in children if (found := _path_to(c, target, loops)) is not None), None)


def _weight_lines_by_tile(k: Kernel, weights: str) -> tuple[dict, dict]:
    """Run `k`'s loops on indices alone: for each tile (the values of the loops around the loop that prefetches into
    L2), the lines of `weights` it reads and the lines it prefetches into L2."""
    (branch,) = [s for s in walk(k.body) if isinstance(s, IfThenElse) and isinstance(s.then, Intrinsic)
                 and s.then.name == PREFETCH_L2]
    outer = _path_to(k.body, branch)[:-1]
    read, fetched = {}, {}

    def line(buffer, indices, env):
        flat = 0
        for i, d in zip(indices, buffer.shape):
            flat = flat * d + int(evaluate(i, env))
        return flat * itemsize(buffer.dtype) // 64

    def run(s, env):
        if isinstance(s, For):
            n = int(evaluate(s.extent, env))
            for v in sorted({0, n - 1}) if s.kind == "vectorized" else range(n):  # contiguous lanes: both ends
                run(s.body, {**env, s.var: v})
        elif isinstance(s, Seq):
            for x in s.stmts:
                run(x, env)
        elif isinstance(s, IfThenElse):
            if evaluate(s.cond, env):
                run(s.then, env)
            elif s.orelse is not None:
                run(s.orelse, env)
        elif isinstance(s, Allocate):
            run(s.body, env)
        else:
            tile = tuple(env.get(x.var) for x in outer)
            if isinstance(s, Intrinsic) and s.name == PREFETCH_L2:
                fetched.setdefault(tile, set()).add(line(*s.operands[0], env))
            elif isinstance(s, Intrinsic) and s.name != PREFETCH:
                read.setdefault(tile, set()).update(line(b, i, env) for b, i in s.operands if b.name == weights)
            elif isinstance(s, Store):
                read.setdefault(tile, set()).update(line(x.buffer, x.indices, env) for x in E.loads(s.value)
                                                    if x.buffer.name == weights)
    run(k.body, {})
    return read, fetched


def _check_next_blocks_fetched(k: Kernel, weights: str) -> None:
    """Each tile prefetches only lines of the block after its own, and the tiles of a block together fetch all of
    the next block's lines that tiles read."""
    read, fetched = _weight_lines_by_tile(k, weights)
    blocks = sorted({min(lines) for lines in read.values() if lines})
    assert len(blocks) >= 2 and all(fetched.values())
    by_block = {b: set().union(*(read[t] for t in read if read[t] and min(read[t]) == b)) for b in blocks}
    for tile, lines in fetched.items():
        if read.get(tile):
            mine = blocks.index(min(read[tile]))
            if mine + 1 < len(blocks):
                assert lines <= by_block[blocks[mine + 1]], tile
    for before, after in zip(blocks, blocks[1:]):
        got = set().union(*(fetched.get(t, set()) for t in read if read[t] and min(read[t]) == before))
        assert by_block[after] <= got


def test_tiles_that_share_a_weight_block_bring_the_next_one_into_l2_between_them():
    """The fp32 panel GEMM and the int8 GEMM: the row tiles of one column chunk read the same block of packed
    weights; between them they prefetch the next chunk's block into L2, each its share, and no other lines."""
    _, _, fp32 = _panel_gemm(Target.with_lanes(16))
    _check_next_blocks_fetched(prefetch_streams(fp32), "w")
    op = lookup("quantized_matmul")
    m, k, n = 48, 256, 128  # 8 row tiles of 6, 64 k groups, 2 chunks of 4 panels
    phs = [te.placeholder((m, k), "uint8", "a"), te.placeholder((n // 16, k // 4, 16, 4), "int8", "w"),
           te.placeholder((n,), "int32", "bias")]
    out = op.compute(*phs, **op.bind_attrs({"n": n, "out_dtype": "int32"}, "test"))
    target = Target(flags=frozenset({"avx512f", "avx512_vnni"}), vector_bits=512)
    _check_next_blocks_fetched(prefetch_streams(use_dot4(lower_kernel((phs, [out]), target=target))), "w")


def test_a_block_read_by_one_tile_alone_gets_no_l2_prefetch():
    """Eight rows, one row tile a column chunk: no tile after it reads the block, so nothing is brought for it."""
    op = lookup("quantized_matmul")
    phs = [te.placeholder((4, 256), "uint8", "a"), te.placeholder((8, 64, 16, 4), "int8", "w"),
           te.placeholder((128,), "int32", "bias")]
    out = op.compute(*phs, **op.bind_attrs({"n": 128, "out_dtype": "int32"}, "test"))
    target = Target(flags=frozenset({"avx512f", "avx512_vnni"}), vector_bits=512)
    k = prefetch_streams(use_dot4(lower_kernel((phs, [out]), target=target)))
    assert _prefetches(k) and not [s for s in walk(k.body) if isinstance(s, Intrinsic) and s.name == PREFETCH_L2]
