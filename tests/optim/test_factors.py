"""The factors the hooks collect equal a direct computation: convolution patches gathered here by explicit loops
over positions (not unfold), output gradients from autograd."""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tilegrad.optim.factors import FactorCollector, find_layers


def _patches_by_loops(x: np.ndarray, k: int, stride: int, pad: int, dilation: int) -> np.ndarray:
    """One row per (sample, output y, output x): the input window, channel-major then kernel row and column."""
    n, _, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    span = dilation * (k - 1) + 1
    rows = []
    for s in range(n):
        for i in range(0, h + 2 * pad - span + 1, stride):
            for j in range(0, w + 2 * pad - span + 1, stride):
                rows.append(xp[s, :, i:i + span:dilation, j:j + span:dilation].reshape(-1))
    return np.array(rows)


def test_conv_factors_equal_a_direct_computation():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, stride=2, padding=1, dilation=2).double()
    model = nn.Sequential(conv, nn.Tanh(), nn.Flatten(), nn.Linear(4 * 3 * 2, 5)).double()
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    layers = find_layers(model)
    collector = FactorCollector(layers)
    collector.collecting = set(layers)
    captured = {}
    conv.register_forward_hook(lambda m, args, out: captured.__setitem__("out", out))
    out = model(x)
    captured["out"].retain_grad()
    F.cross_entropy(out, torch.tensor([1, 3])).backward()
    a, g = collector.take(layers[0])

    patches = _patches_by_loops(x.numpy(), 3, 2, 1, 2)
    np.testing.assert_allclose(a.numpy(), patches.T @ patches / len(patches), rtol=1e-10)
    grad_out = captured["out"].grad.numpy()             # (N, out, H', W'): rows in (sample, y, x) order
    rows = grad_out.transpose(0, 2, 3, 1).reshape(-1, 4) * 2
    assert rows.shape[0] == patches.shape[0]
    np.testing.assert_allclose(g.numpy(), rows.T @ rows / len(rows), rtol=1e-10)


def test_only_passes_with_gradients_while_collecting_count():
    model = nn.Sequential(nn.Linear(3, 2))
    layers = find_layers(model)
    collector = FactorCollector(layers)
    x = torch.randn(4, 3)
    model(x).sum().backward()                           # not collecting
    collector.collecting = set(layers)
    with torch.no_grad():
        model(x)                                        # evaluation
    assert collector.take(layers[0]) is None
    model(x).sum().backward()
    model(2 * x).sum().backward()                       # two passes before one step are averaged
    a, _ = collector.take(layers[0])
    torch.testing.assert_close(a, (x.T @ x + 4 * x.T @ x) / 8)
    collector.remove()
    model(x).sum().backward()
    assert collector.take(layers[0]) is None


def test_grouped_convolutions_and_other_layers_are_left_to_sgd():
    model = nn.Sequential(nn.Conv2d(4, 4, 3, groups=2), nn.BatchNorm2d(4), nn.Conv2d(4, 2, 1), nn.Flatten(),
                          nn.LayerNorm(8), nn.Linear(8, 2))
    assert [layer.name for layer in find_layers(model)] == ["2", "5"]
