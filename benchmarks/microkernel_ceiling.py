"""The ceiling of a register-blocked GEMM micro-kernel on this CPU: what the instruction mix itself allows, before
any cache or memory effect, against the FMA peak the rest of the project measures kernels by.

Each case is one loop of hand-written assembly, its data in L1, run on every configured thread (best of five
runs of ~0.3 s): the pure FMA rate (independent accumulators, no memory operand), FMAs fed by vector loads alone,
FMAs fed by broadcasts alone, and the mixes of the register tiles a GEMM uses (mr rows broadcast from A, nv
vectors of B loaded, mr x nv accumulators), with and without a prefetch per loaded line. A generated kernel
reaching the mix's rate is at this machine's practical limit for its tile, whatever `% of peak` says; the
difference between the mixes and the pure rate is the core's, not the compiler's. Run:

    python benchmarks/microkernel_ceiling.py           # the table
    python benchmarks/microkernel_ceiling.py --json    # one JSON document: {"machine": {...}, "rows": [...]}
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from tilegrad import config
from tilegrad.runtime.build import find_compiler
from tilegrad.runtime.peaks import cached_peaks
from tilegrad.target import host

STEPS = 20_000_000  # loop iterations per thread and run: ~0.3 s at two FMAs a cycle for 24 accumulators

_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <omp.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
  double best = 1e30;
  for (int run = 0; run < 5; run++) {
    double start = now();
    #pragma omp parallel
    {
      long n = STEPS;
      float* mem = aligned_alloc(64, 65536);
      for (int i = 0; i < 16384; i++) mem[i] = 1e-3f;
      __asm__ volatile(INIT "1:\n\t" BODY "dec %0\n\tjnz 1b" : "+r"(n) : "r"(mem) : "memory");
      free(mem);
    }
    double t = now() - start;
    if (t < best) best = t;
  }
  printf("%.9f %d\n", best, omp_get_max_threads());
  return 0;
}
"""


def _isa() -> tuple[str, int, int]:
    """(register prefix, float lanes, vector registers) of the widest FMA extension here."""
    flags = host().flags
    if "avx512f" in flags:
        return "zmm", 16, 32
    if "avx2" in flags and "fma" in flags:
        return "ymm", 8, 16
    raise SystemExit("microkernel_ceiling: needs x86-64 with AVX2 and FMA, or AVX-512")


def _body(reg: str, mr: int, nv: int, loads: bool, broadcasts: bool, prefetch: bool,
          registers: int) -> tuple[str, str]:
    """One step of an mr x nv tile: nv vector loads of B (or B in registers), mr broadcasts of A (or one A in a
    register), mr * nv FMAs; the registers above the accumulators hold B's vectors and the broadcast value.
    Returns the step's assembly and the assembly that zeroes every register it uses."""
    b = [mr * nv + v for v in range(nv)]
    a = mr * nv + nv
    assert a < registers, "the tile needs more registers than the ISA has"
    lines = [f"vmovups {64 * v}(%1), %%{reg}{b[v]}" for v in range(nv)] if loads else []
    lines += [f"prefetcht0 {8192 + 64 * v}(%1)" for v in range(nv)] if prefetch else []
    acc = 0
    for i in range(mr):
        if broadcasts:
            lines.append(f"vbroadcastss {4096 + 256 * i}(%1), %%{reg}{a}")
        for v in range(nv):
            lines.append(f"vfmadd231ps %%{reg}{a}, %%{reg}{b[v]}, %%{reg}{acc}")
            acc += 1
    init = "".join(f"vxorps %%{reg}{r}, %%{reg}{r}, %%{reg}{r}\\n\\t" for r in range(a + 1))
    return "".join(f"{line}\\n\\t" for line in lines), init


def _cases(lanes: int, registers: int) -> list[tuple[str, int, int, bool, bool, bool]]:
    """(name, mr, nv, loads, broadcasts, prefetch): the pure rate, each operand alone, the tiles that fit."""
    acc = registers - 4  # independent chains: far more than the FMA latency x the FMAs issued per cycle
    tiles = [(8, 3), (6, 4), (4, 6), (12, 2), (14, 2)] if registers == 32 else [(6, 2), (4, 3), (4, 2)]
    cases = [("pure FMA", acc, 1, False, False, False)]
    mr, nv = tiles[0]
    cases += [("B loads only", mr, nv, True, False, False), ("A broadcasts only", mr, nv, False, True, False)]
    cases += [(f"{mr} x {nv * lanes} tile", mr, nv, True, True, False) for mr, nv in tiles
              if mr * nv + nv + 1 <= registers]
    cases.append((f"{mr} x {nv * lanes} tile + prefetch", mr, nv, True, True, True))
    return cases


def run(threads: int) -> dict:
    reg, lanes, registers = _isa()
    cc = find_compiler()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, mr, nv, loads, broadcasts, prefetch in _cases(lanes, registers):
            body, init = _body(reg, mr, nv, loads, broadcasts, prefetch, registers)
            source = (_PROGRAM.replace("STEPS", str(STEPS)).replace("INIT", f'"{init}"')
                      .replace("BODY", f'"{body}"'))
            src, exe = Path(tmp) / "k.c", Path(tmp) / "k"
            src.write_text(source)
            subprocess.run([cc, "-O2", "-fopenmp", str(src), "-o", str(exe)], check=True)
            out = subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                                 env={**os.environ, "OMP_NUM_THREADS": str(threads)}).stdout.split()
            seconds, team = float(out[0]), int(out[1])
            gflops = 2.0 * lanes * mr * nv * STEPS * team / seconds / 1e9
            rows.append({"case": name, "mr": mr, "nv": nv, "gflops": round(gflops, 1)})
    pure = rows[0]["gflops"]
    peaks = cached_peaks(threads)
    for row in rows:
        row["of_pure"] = round(row["gflops"] / pure, 3)
        row["of_peak"] = round(row["gflops"] / peaks.fma_gflops, 3) if peaks else None
    machine = {"cpu": host().model, "isa": reg, "threads": threads,
               "cached_peak_gflops": peaks.fma_gflops if peaks else None}
    return {"machine": machine, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=config.get().num_threads)
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args()
    result = run(args.threads)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    m = result["machine"]
    print(f"{m['cpu']}, {m['isa']}, {m['threads']} threads; cached FMA peak {m['cached_peak_gflops']} GFLOP/s")
    print(f"{'case':<28}{'GFLOP/s':>9}{'of pure':>9}{'of peak':>9}")
    for r in result["rows"]:
        peak = f"{r['of_peak']:.0%}" if r["of_peak"] is not None else "-"
        print(f"{r['case']:<28}{r['gflops']:>9.1f}{r['of_pure']:>9.0%}{peak:>9}")


if __name__ == "__main__":
    main()
