"""How N processes share this machine's cores: the cores this process may run on, the intra-op threads each
worker gets, and the share of a core's time each thread gets once the workers' threads outnumber the cores.

When 4 processes of one thread each run on 2 cores, the kernel time-slices them: each gets half a core, so its
compute and its share of the memory bandwidth halve, and per-op overheads (Python, autograd) take twice as long
in wall time. The cost model scales a process's figures by `core_share` (`calibrate.measured_machine`).
"""

from __future__ import annotations

import os

from ..errors import TilegradError


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, which a container or `taskset` narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this platform
        return os.cpu_count() or 1


def threads_per_process(processes: int, cores: int) -> int:
    """Intra-op threads for each of `processes` workers: the cores shared out, at least one."""
    if processes < 1 or cores < 1:
        raise TilegradError(f"host: {processes} processes on {cores} cores; both must be at least 1")
    return max(1, cores // processes)


def core_share(processes: int, cores: int) -> float:
    """The fraction of a core each worker thread gets: 1 while the threads fit the cores, cores / threads once
    they outnumber them (the kernel time-slices the threads evenly)."""
    threads = processes * threads_per_process(processes, cores)
    return min(1.0, cores / threads)
