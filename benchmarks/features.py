"""Feature throughput: how many candidates per second the cost model's features cost.

For two realistic sketches (a multi-level tiled matmul and a register-tiled NCHW[8]c convolution, 8 schedule
variables each) this derives the feature formulas once, then evaluates a batch of random valid assignments with
the numbered NumPy program, and compares with the concrete path (replay the trace with integers, lower, extract)
per candidate. docs/benchmarks.md quotes its output.

    python benchmarks/features.py [--batch 4096] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from timing import median_time  # noqa: E402

from tilegrad import te  # noqa: E402
from tilegrad.loop import lower  # noqa: E402
from tilegrad.schedule import Schedule, apply_trace  # noqa: E402
from tilegrad.te import expr as E  # noqa: E402
from tilegrad.te import nn  # noqa: E402
from tilegrad.te.nn import nchwc  # noqa: E402
from tilegrad.tune.features.extract import features  # noqa: E402
from tilegrad.tune.features.formulas import FeatureFormulas  # noqa: E402


def _var(name: str, hi: int, lo: int = 1) -> E.Var:
    return E.Var(name, E.INDEX, lo, hi)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def matmul_sketch():
    """C = A B (256 x 256 x 256): an accumulator tile at the fused parallel loop, two more tiling levels inside
    it, the reduction split, auto-unroll with a symbolic budget; the copy-out vectorised."""
    def make():
        a, b = te.placeholder((256, 256), "float32", "A"), te.placeholder((256, 256), "float32", "B")
        return nn.matmul(a, b, name="C")

    v = {n: _var(n, 256) for n in ("tile_i_1", "tile_i_2", "tile_i_3", "tile_j_1", "tile_j_2", "tile_j_3",
                                    "tile_k")}
    um = _var("unroll_max", 512, 0)
    s = Schedule(make())
    cl = s.cache_write("C")
    i0, i1 = s.split("C", "i", v["tile_i_1"], exact=True)
    j0, j1 = s.split("C", "j", v["tile_j_1"], exact=True)
    s.reorder("C", i0, j0, i1, j1)
    f = s.fuse("C", i0, j0)
    s.parallel("C", f)
    s.vectorize("C", j1)
    s.compute_at(cl, "C", f)
    ii0, ii1 = s.split(cl, "i", v["tile_i_2"], exact=True)
    ii1, ii2 = s.split(cl, ii1, v["tile_i_3"], exact=True)
    jj0, jj1 = s.split(cl, "j", v["tile_j_2"], exact=True)
    jj1, jj2 = s.split(cl, jj1, v["tile_j_3"], exact=True)
    k0, k1 = s.split(cl, "k", v["tile_k"], exact=True)
    s.reorder(cl, ii0, jj0, k0, ii1, jj1, k1, ii2, jj2)
    s.auto_unroll(cl, um)

    def sample(rng):
        t1, u1 = rng.choice(_divisors(256)), rng.choice(_divisors(256))
        t2, u2 = rng.choice(_divisors(t1)), rng.choice(_divisors(u1))
        return {"tile_i_1": t1, "tile_i_2": t2, "tile_i_3": rng.choice(_divisors(t2)), "tile_j_1": u1,
                "tile_j_2": u2, "tile_j_3": rng.choice(_divisors(u2)), "tile_k": rng.choice(_divisors(256)),
                "unroll_max": rng.choice([0, 16, 64, 512])}

    return make, s.trace, sample


def conv_nchwc_sketch():
    """3x3 convolution in NCHW[8]c (1 x 64 x 28 x 28 -> 64 channels, padded): the padded input its own stage
    (tiled, auto-unrolled), an accumulator per output tile computed at the fused parallel loop, the input-channel
    lanes split, the output lanes vectorised."""
    def make():
        x = te.placeholder((1, 8, 28, 28, 8), "float32", "X")
        w = te.placeholder((8, 64, 3, 3, 8), "float32", "W")
        return nchwc.conv2d_nchwc(x, w, padding=1, name="Y")

    tcb, th, tw = _var("tile_cb", 8), _var("tile_h", 28), _var("tile_w", 28)
    trci, th2, tw2 = _var("tile_rci", 8), _var("tile_h_2", 28), _var("tile_w_2", 28)
    tpad, um = _var("tile_pad", 30), _var("unroll_max", 512, 0)
    s = Schedule(make())
    pw0, pw1 = s.split("Y_pad", "w", tpad, exact=True)
    s.parallel("Y_pad", "h")
    s.auto_unroll("Y_pad", um)
    yl = s.cache_write("Y")
    cb0, cb1 = s.split("Y", "cb", tcb, exact=True)
    h0, h1 = s.split("Y", "h", th, exact=True)
    w0, w1 = s.split("Y", "w", tw, exact=True)
    s.reorder("Y", "n", cb0, h0, w0, cb1, h1, w1, "ci")
    f = s.fuse("Y", "n", cb0, h0)
    s.parallel("Y", f)
    s.vectorize("Y", "ci")
    s.compute_at(yl, "Y", w0)
    lh0, lh1 = s.split(yl, "h", th2, exact=True)
    lw0, lw1 = s.split(yl, "w", tw2, exact=True)
    rci0, rci1 = s.split(yl, "rci", trci, exact=True)
    s.reorder(yl, "n", "cb", lh0, lw0, "rcb", rci0, "ry", "rx", rci1, lh1, lw1, "ci")
    s.vectorize(yl, "ci")

    def sample(rng):
        h, w = rng.choice(_divisors(28)), rng.choice(_divisors(28))
        return {"tile_cb": rng.choice(_divisors(8)), "tile_h": h, "tile_w": w,
                "tile_rci": rng.choice(_divisors(8)), "tile_h_2": rng.choice(_divisors(h)),
                "tile_w_2": rng.choice(_divisors(w)), "tile_pad": rng.choice(_divisors(30)),
                "unroll_max": rng.choice([0, 16, 64, 512])}

    return make, s.trace, sample


def measure(name: str, sketch, batch: int, repeats: int) -> None:
    make, trace, sample = sketch()
    start = time.perf_counter()
    symbolic = lower(apply_trace(make(), trace))
    lower_s = time.perf_counter() - start
    derive = median_time(lambda: FeatureFormulas(symbolic), repeats)
    ff = FeatureFormulas(symbolic)
    rng = np.random.default_rng(0)
    picks = [sample(rng) for _ in range(batch)]
    env = {v: np.array([int(p[v]) for p in picks]) for v in ff.variables}
    per_batch = median_time(lambda: ff.evaluate(env), repeats)
    out = ff.evaluate(env)
    n_concrete = 20
    start = time.perf_counter()
    for p in picks[:n_concrete]:
        features(lower(apply_trace(make(), trace, {k: int(x) for k, x in p.items()})))
    concrete = (time.perf_counter() - start) / n_concrete
    for n in range(0, batch, max(1, batch // 4)):
        want = features(lower(apply_trace(make(), trace, {k: int(x) for k, x in picks[n].items()})))
        assert np.array_equal(out[n], want), f"{name}: candidate {n} differs from its concrete program"
    print(f"{name}: {len(ff.variables)} variables, {len(ff.stores)} stores x {len(ff.names)} features, "
          f"{ff.program.n_nodes} distinct nodes")
    print(f"  symbolic lowering {lower_s * 1e3:.0f} ms, deriving + numbering formulas {derive * 1e3:.0f} ms")
    print(f"  batch of {batch}: {per_batch * 1e3:.1f} ms = {batch / per_batch:,.0f} candidates/s")
    print(f"  concrete path (replay, lower, extract): {concrete * 1e3:.1f} ms = {1 / concrete:,.0f} candidates/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for name, sketch in (("matmul 256^3, tiled", matmul_sketch), ("conv2d NCHW[8]c 3x3", conv_nchwc_sketch)):
        measure(name, sketch, args.batch, args.repeats)


if __name__ == "__main__":
    main()
