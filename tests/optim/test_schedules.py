"""get_thor_lr and get_thor_damping against values worked out by hand from the seed's definitions."""

import numpy as np

from tilegrad.optim import get_thor_damping, get_thor_lr


def test_thor_lr_decays_polynomially_and_halves_twice():
    # 2 steps per epoch, 4 epochs: the steps end epochs 0.5, 1, ..., 4; decay 1 is linear; halved from epoch 2,
    # halved again from epoch 3
    lr = get_thor_lr(0, 1.0, 1.0, 4, 2, decay_epochs=2)
    base = 1 - np.array([0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4]) / 4
    np.testing.assert_allclose(lr, base * np.array([1, 1, 1, 0.5, 0.5, 0.25, 0.25, 0.25]), rtol=1e-6)
    np.testing.assert_allclose(get_thor_lr(3, 1.0, 1.0, 4, 2, decay_epochs=2), lr[3:])
    np.testing.assert_allclose(get_thor_lr(0, 0.1, 2.0, 4, 1)[:2], [0.1 * 0.75 ** 2, 0.1 * 0.5 ** 2], rtol=1e-6)


def test_thor_damping_decays_by_the_rate_every_ten_epochs():
    damping = get_thor_damping(0, 0.03, 0.5, 20, 1)
    assert damping.shape == (20,) and damping.dtype == np.float32
    np.testing.assert_allclose(damping[[9, 19]], [0.015, 0.0075], rtol=1e-6)
    np.testing.assert_allclose(damping[4], 0.03 * 0.5 ** 0.5, rtol=1e-6)
    np.testing.assert_allclose(get_thor_damping(5, 0.03, 0.5, 20, 1), damping[5:])
