"""Each calibration method on a hand-computed case, and the seed's search settings (41 and 141 candidates)."""

import numpy as np
import pytest

from tilegrad.quant.divergence import js, kl, symmetric_kl
from tilegrad.quant.ranges import (
    SearchSettings,
    candidates,
    divergence_search,
    max_min,
    remove_outlier,
    search_scores,
)
from tilegrad.quant.statistics import Extremes, Histogram


def test_the_seeds_first_example_has_41_candidates_80_to_120():
    c = candidates(100.0, SearchSettings(start=0.8, end=1.2, step=0.01))
    assert len(c) == 41 and np.allclose(c, np.arange(80, 121))


def test_the_seeds_second_example_has_141_candidates_and_stores_141_by_150_counts():
    settings = SearchSettings(bins=150, start=0.3, end=1.7, step=0.01)
    assert len(candidates(1.0, settings)) == 141
    assert SearchSettings() == settings  # the default is the seed's second example


def _stats(batches):
    ext = Extremes()
    for b in batches:
        ext.add(b)
    hist = Histogram(ext.lo, ext.hi)
    for b in batches:
        hist.add(b)
    return ext, hist


def test_max_min_is_the_observed_range_and_its_symmetric_form():
    ext, _ = _stats([np.array([-1.0, 2.0]), np.array([0.5, 3.0])])
    assert max_min(ext, symmetric=False) == (-1.0, 3.0)
    assert max_min(ext, symmetric=True) == (-3.0, 3.0)


def test_remove_outlier_keeps_the_central_90_percent():
    # 1000 values: 50 at -100, 900 evenly in [-1, 1], 50 at +100; the 5% and 95% points are the ends of [-1, 1]
    core = np.linspace(-1, 1, 900)
    x = np.concatenate([np.full(50, -100.0), core, np.full(50, 100.0)])
    _, hist = _stats([x[:500], x[500:]])  # over two batches
    width = 200 / len(hist.counts)
    lo, hi = remove_outlier(hist, symmetric=False)
    assert abs(lo + 1) <= width and abs(hi - 1) <= width
    assert remove_outlier(hist, symmetric=True) == (-max(-lo, hi), max(-lo, hi))


def test_divergences_on_a_two_bin_case():
    p, q = np.array([1.0, 1.0]), np.array([1.0, 3.0])  # P = (1/2, 1/2), Q = (1/4, 3/4)
    d_pq = 0.5 * np.log2(2) + 0.5 * np.log2(0.5 / 0.75)
    d_qp = 0.25 * np.log2(0.5) + 0.75 * np.log2(1.5)
    m = np.array([0.375, 0.625])
    d_js = 0.5 * (0.5 * np.log2(0.5 / m[0]) + 0.5 * np.log2(0.5 / m[1])
                  + 0.25 * np.log2(0.25 / m[0]) + 0.75 * np.log2(0.75 / m[1]))
    assert kl(p, q) == pytest.approx(d_pq)
    assert symmetric_kl(p, q) == pytest.approx(0.5 * (d_pq + d_qp))
    assert js(p, q) == pytest.approx(d_js)


def _brute_force_scores(x, symmetric, metric, settings):
    """The seed's procedure on the raw values: histogram them over [0, 2 extent], quantize them to each
    candidate's grid and histogram again; the divergence of each candidate."""
    from tilegrad.quant.divergence import DIVERGENCES

    v = np.abs(x) if symmetric else x - x.min()
    levels = 127 if symmetric else 255
    extent = v.max()
    edges = (0, 2 * extent)
    p = np.histogram(np.minimum(v, np.nextafter(2 * extent, 0)), bins=settings.bins, range=edges)[0]
    out = []
    for c in candidates(extent, settings):
        step = c / levels
        quantized = np.minimum(np.rint(v / step), levels) * step
        out.append(DIVERGENCES[metric](p, np.histogram(quantized, bins=settings.bins, range=edges)[0]))
    return np.array(out)


@pytest.mark.parametrize("metric", ["kl", "symmetric_kl", "js"])
@pytest.mark.parametrize("symmetric", [True, False])
def test_divergence_search_matches_the_procedure_on_raw_values(metric, symmetric):
    rng = np.random.default_rng(0)
    # a long tail, which the search clips: on both sides for a symmetric range, above (like ReLU's) otherwise,
    # since the asymmetric search keeps the minimum
    x = np.concatenate([rng.laplace(0, 1, 20000), [12.0, -9.0]] if symmetric else [rng.exponential(1, 20000), [20.0]])
    settings = SearchSettings()
    _, hist = _stats([x[:10000], x[10000:]])
    brute = _brute_force_scores(x, symmetric, metric, settings)
    extent = max(abs(x.min()), x.max()) if symmetric else x.max() - x.min()
    lo, hi = divergence_search(hist, symmetric, metric, settings)
    chosen = hi if symmetric else hi - lo
    k = int(np.argmin(np.abs(candidates(extent, settings) - chosen)))
    # the divergence of the histograms derived from the fine one is the raw procedure's, to the fine bins: the
    # candidate chosen is as good as the raw procedure's best (the curve has near-equal minima where the grid
    # and the bins alias)
    assert brute[k] <= 1.25 * brute.min() < brute[-1]
    assert chosen < 0.9 * extent  # the outliers are clipped


def test_divergence_search_does_not_clip_uniform_values():
    x = np.linspace(0, 1, 10001)
    _, hist = _stats([x])
    lo, hi = divergence_search(hist, symmetric=False, metric="kl")
    # clipping piles mass into one bin; wider ranges only change how the grid aliases with the 150 bins
    assert lo == 0.0 and 1.0 <= hi <= 1.2


def test_search_scores_grow_when_the_range_clips_mass():
    values, counts = np.linspace(0, 1, 4001), np.ones(4001)
    scores = search_scores(values, counts, 255, 1.0, "kl", SearchSettings())
    assert scores[0] > scores[70]  # 0.3 max clips 70% of the values; 1.0 max clips none
