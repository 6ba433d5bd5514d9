"""The seed's measures of how far a quantized histogram Q lies from the float one P (3.33-3.36), in bits.

Histograms are normalised first. A bin empty in one and not the other would make the divergence infinite, so
empty bins get EPSILON of probability, taken in proportion from the others (the usual smoothing of calibrators)."""

from __future__ import annotations

import numpy as np

EPSILON = 1e-4


def smooth(counts: np.ndarray) -> np.ndarray:
    """`counts` as a distribution with no empty bin."""
    p = np.asarray(counts, np.float64)
    p = p / p.sum()
    empty = p == 0
    if empty.any() and not empty.all():
        p = np.where(empty, EPSILON, p * (1 - EPSILON * empty.sum()))
    return p / p.sum()


def _kl_bits(p: np.ndarray, q: np.ndarray) -> float:
    """D_KL(p || q) of two distributions with no empty bin, log base 2."""
    return float(np.sum(p * np.log2(p / q)))


def kl(p_counts: np.ndarray, q_counts: np.ndarray) -> float:
    """(3.33): D_KL(P || Q)."""
    return _kl_bits(smooth(p_counts), smooth(q_counts))


def symmetric_kl(p_counts: np.ndarray, q_counts: np.ndarray) -> float:
    """(3.34): the mean of D_KL(P || Q) and D_KL(Q || P)."""
    p, q = smooth(p_counts), smooth(q_counts)
    return 0.5 * (_kl_bits(p, q) + _kl_bits(q, p))


def js(p_counts: np.ndarray, q_counts: np.ndarray) -> float:
    """(3.35, 3.36): Jensen-Shannon, the mean of each one's divergence from their average M."""
    p, q = smooth(p_counts), smooth(q_counts)
    m = 0.5 * (p + q)
    return 0.5 * (_kl_bits(p, m) + _kl_bits(q, m))


DIVERGENCES = {"kl": kl, "symmetric_kl": symmetric_kl, "js": js}
