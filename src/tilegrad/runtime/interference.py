"""CPU time this process lost to others: the clock the timing loop reads to tell a disturbed repeat from a clean one.

A repeat is disturbed when the timed kernel's threads were ready to run but not running. Two sources, both read
from Linux's /proc:

- **Runqueue wait** (`/proc/self/task/*/schedstat`, second field, nanoseconds): another thread held the core. The
  tuner's own process is the usual culprit: after a NumPy matmul its BLAS pool spins for ~0.1 s, and a kernel timed
  then shares its cores with it.
- **Steal** (`/proc/stat`, the `cpuN` lines of the CPUs this process may run on, eighth field, clock ticks): the
  hypervisor ran another guest on our virtual CPU.

Where /proc has neither (not Linux), nothing is lost as far as anyone can tell: `lost_seconds` reads 0, and every
repeat counts.
"""

from __future__ import annotations

import os

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
_STEAL_FIELD = 8  # in a `cpuN user nice system idle iowait irq softirq steal ...` line


def lost_seconds() -> float:
    """Seconds, summed over this process's threads and CPUs, of waiting while runnable; a clock only differences of
    which mean anything."""
    return _runqueue_wait_s() + _steal_s()


def _runqueue_wait_s() -> float:
    total = 0
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return 0.0
    for tid in threads:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):  # a thread that ended between the listing and the read
            continue
    return total * 1e-9


def _steal_s() -> float:
    try:
        mine = {f"cpu{c}" for c in os.sched_getaffinity(0)}
        with open("/proc/stat") as f:
            ticks = sum(int(fields[_STEAL_FIELD]) for fields in map(str.split, f)
                        if fields and fields[0] in mine and len(fields) > _STEAL_FIELD)
    except (OSError, AttributeError, ValueError):
        return 0.0
    return ticks * _TICK_S
