"""End to end: declare a matmul, schedule it (default rules and by hand), compile to native code, check and time it.

    python examples/matmul.py
"""

import numpy as np

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.loop import format_kernel
from tilegrad.runtime import time_kernel
from tilegrad.schedule import Schedule
from tilegrad.schedule.defaults import default_schedule
from tilegrad.te import nn

M, N, K = 256, 256, 256
A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
C = nn.matmul(A, B, name="C")

# A schedule by hand: a 4x32 register tile of C accumulated over k, row blocks in parallel.
sch = Schedule(C)
local = sch.cache_write("C")
i0, j0, i1, j1 = sch.tile("C", "i", "j", 4, 32)
sch.parallel("C", i0)
sch.vectorize("C", j1)
sch.compute_at(local, "C", j0)
sch.reorder(local, "k", "i", "j")
sch.unroll(local, "i")
sch.vectorize(local, "j")

print("trace:\n" + str(sch.trace))
print("\nloop IR:\n" + format_kernel(build(sch).loop))

rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype("float32")
b = rng.standard_normal((K, N)).astype("float32")
for label, schedule in [("hand-written", sch), ("default", default_schedule(C))]:
    kernel = build(schedule, name="matmul")
    c = kernel.run(a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
    t = time_kernel(kernel.kernel, [a, b, np.empty_like(c)], repeats=5).median
    print(f"{label:>12}: correct, {t * 1e3:.3f} ms, {2 * M * N * K / t / 1e9:.1f} GFLOP/s")
