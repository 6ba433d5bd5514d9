"""Sharing the machine's cores: threads per worker, and each thread's share of a core once the workers' threads
outnumber the cores (4 processes on 2 cores time-slice: half a core each)."""

import pytest

from tilegrad.errors import TilegradError
from tilegrad.parallel.host import core_share, threads_per_process, usable_cores


def test_workers_share_out_the_cores_with_at_least_one_thread_each():
    assert threads_per_process(1, 8) == 8
    assert threads_per_process(3, 8) == 2
    assert threads_per_process(4, 2) == 1


@pytest.mark.parametrize("processes, cores, share", [(1, 2, 1.0), (2, 2, 1.0), (3, 2, 2 / 3), (4, 2, 0.5),
                                                      (3, 8, 1.0), (16, 8, 0.5)])
def test_each_thread_gets_a_core_until_the_threads_outnumber_the_cores(processes, cores, share):
    assert core_share(processes, cores) == pytest.approx(share)


def test_the_usable_cores_are_this_process_s_own():
    assert usable_cores() >= 1


def test_no_processes_or_no_cores_is_refused():
    with pytest.raises(TilegradError, match="0 processes on 2 cores"):
        core_share(0, 2)
