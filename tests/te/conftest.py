import numpy as np
import pytest


@pytest.fixture
def randn():
    """Seeded float32 normal samples: randn(2, 3) is an array of shape (2, 3)."""
    rng = np.random.default_rng(0)
    return lambda *shape: rng.standard_normal(shape).astype(np.float32)
