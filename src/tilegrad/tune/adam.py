"""Adam, the one optimiser of tuning: Felix's descent on schedule parameters and the MLP cost model's training.

Kingma and Ba's method with PyTorch's defaults (betas 0.9 and 0.999, eps 1e-8), written out in NumPy: the
descent's points are NumPy arrays, the cost model's parameters are updated through NumPy views of its tensors, and
`torch.optim`'s first optimiser would import TorchDynamo, seconds of a tuning's first round.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Adam:
    """Adam on a list of arrays, which `step` updates in place (in their own dtype)."""

    def __init__(self, params: Sequence[np.ndarray], betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params, self.betas, self.eps, self.t = list(params), betas, eps, 0
        self.m = [np.zeros_like(p) for p in self.params]
        self.v = [np.zeros_like(p) for p in self.params]

    def step(self, grads: Sequence[np.ndarray], learning_rate: float) -> None:
        """One step down the gradients `grads` (one per parameter, of its shape)."""
        b1, b2 = self.betas
        self.t += 1
        first, second = 1 - b1 ** self.t, 1 - b2 ** self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g ** 2
            p -= learning_rate * (m / first) / (np.sqrt(v / second) + self.eps)
