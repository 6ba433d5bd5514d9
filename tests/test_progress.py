"""A compile on a terminal shows its progress (the graph passes, the kernels of their total, the build and whether
the library came from the cache) and erases it at the end; elsewhere (a pipe, a log, the tuner) it prints
nothing."""

import io
import sys

import numpy as np
import torch
from torch import nn

import tilegrad


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _compile(monkeypatch, stream):
    monkeypatch.setattr(sys, "stderr", stream)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 4)).eval()
    x = torch.randn(1, 3, 6, 6)
    module = tilegrad.compile(net, (x,))
    np.testing.assert_allclose(module(x.numpy()), net(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_a_compile_on_a_terminal_shows_passes_kernels_and_the_build(monkeypatch):
    terminal = _Terminal()
    _compile(monkeypatch, terminal)
    shown = terminal.getvalue()
    assert "graph passes" in shown and "kernels" in shown and "building" in shown, shown
    assert "from the build cache" in shown or "built" in shown


def test_a_compile_elsewhere_prints_nothing(monkeypatch):
    pipe = io.StringIO()
    _compile(monkeypatch, pipe)
    assert pipe.getvalue() == ""
