"""THOR's learning-rate and damping schedules, as MindSpore's ResNet-50 recipe defines them (`get_thor_lr`,
`get_thor_damping`): one value per training step, from `global_step` on.

Why precomputed arrays: the recipe hands the optimizer a per-step table; here the learning rate table drives a
`torch.optim.lr_scheduler.LambdaLR` and the damping table is THOR's `damping` argument.
"""

from __future__ import annotations

import numpy as np


def _epochs(total_epochs: int, steps_per_epoch: int) -> np.ndarray:
    """The (fractional) epoch each step ends in: step i ends epoch (i + 1) / steps_per_epoch."""
    return np.arange(1, total_epochs * steps_per_epoch + 1, dtype=np.float64) / steps_per_epoch


def get_thor_lr(global_step: int, lr_init: float, decay: float, total_epochs: int, steps_per_epoch: int,
                decay_epochs: int = 100) -> np.ndarray:
    """Polynomial decay lr_init * (1 - epoch / total_epochs) ** decay, halved once from `decay_epochs` on and
    halved again from `decay_epochs + 1` on; the steps from `global_step` to the end."""
    epoch = _epochs(total_epochs, steps_per_epoch)
    lr = lr_init * (1.0 - epoch / total_epochs) ** decay
    lr = np.where(epoch >= decay_epochs, 0.5 * lr, lr)
    lr = np.where(epoch >= decay_epochs + 1, 0.5 * lr, lr)
    return lr.astype(np.float32)[global_step:]


def get_thor_damping(global_step: int, damping_init: float, decay_rate: float, total_epochs: int,
                     steps_per_epoch: int) -> np.ndarray:
    """Exponential decay damping_init * decay_rate ** (epoch / 10); the steps from `global_step` to the end."""
    epoch = _epochs(total_epochs, steps_per_epoch)
    return (damping_init * decay_rate ** (epoch / 10)).astype(np.float32)[global_step:]
