"""A module's library, once its last kernel is gone, is closed with the buffers its kernels kept between calls
(codegen/c.py, KEPT): a process loading and dropping modules (a dynamic module's evicted specialisations) keeps
the memory of the live ones only."""

import ctypes
import gc

import numpy as np
import torch
from torch import nn

import tilegrad


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]


def _heap_bytes() -> int:
    """glibc's bytes in use: in mmap'd blocks and in the main arena (the calling thread's, which allocates the
    kept buffers)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    return info.hblkhd + info.uordblks


def test_a_closed_library_frees_the_buffers_its_kernels_kept(tmp_path):
    torch.manual_seed(0)
    conv = nn.Conv2d(64, 64, 3, padding=1).eval()  # Winograd: its transforms keep buffers of hundreds of KiB
    x = torch.randn(1, 64, 28, 28)
    tilegrad.compile(conv, (x,)).save(tmp_path / "m")
    want = conv(x).detach().numpy()

    def load_call_drop() -> None:
        module = tilegrad.load(tmp_path / "m")
        np.testing.assert_allclose(module(x.numpy()), want, rtol=1e-4, atol=1e-4)
        del module
        gc.collect()

    load_call_drop()
    before = _heap_bytes()
    for _ in range(6):
        load_call_drop()
    assert _heap_bytes() - before < 1 << 20  # each load kept 1.1 MiB, never freed, before the list
