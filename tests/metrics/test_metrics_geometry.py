"""Geometry measures on synthetic data with known answers, the runner task, and e5-small (slow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from babelspace.metrics.geometry import (
    anisotropy,
    anisotropy_from_total_variance,
    cross_k_occurrence,
    dimension_std,
    effective_rank,
    explained_variance,
    geometry,
    hubness_skew,
    k_occurrence,
    language_share,
    total_variance,
    variance_spectrum,
)


def test_effective_rank_isotropic_and_rank_one() -> None:
    rng = np.random.default_rng(0)
    iso = rng.normal(size=(20000, 16))
    assert effective_rank(variance_spectrum(iso)) == pytest.approx(16, rel=0.02)
    line = np.outer(rng.normal(size=500), rng.normal(size=16))
    assert effective_rank(variance_spectrum(line)) == pytest.approx(1.0, abs=1e-6)
    plane = rng.normal(size=(5000, 2)) @ rng.normal(size=(2, 16))
    assert 1.0 < effective_rank(variance_spectrum(plane)) <= 2.0 + 1e-9
    assert effective_rank(np.array([1.0, 1.0, 1.0, 1.0])) == pytest.approx(4.0)


def test_collapsed_cone_has_near_zero_total_variance_but_high_spectrum_rank() -> None:
    """The collapse MEXMA's KoLeo fights: every vector within a narrow cone. The total variance sees
    it; the effective rank (scale-free: the spectrum's shape) does not."""
    rng = np.random.default_rng(5)
    d = 32
    iso = rng.normal(size=(4000, d))
    axis = np.zeros(d)
    axis[0] = 1.0
    cone = axis + 0.01 * iso  # all within ~0.06 rad of one axis
    spread_var, cone_var = total_variance(iso), total_variance(cone)
    assert spread_var > 0.99
    assert cone_var < 0.005
    # the cone's spectrum: 31 equal directions (the radial one is squashed by the normalisation)
    assert effective_rank(variance_spectrum(l2(cone))) > 25
    assert anisotropy(cone) > 0.99
    std_min, std_median = dimension_std(cone)
    assert std_median < 0.02 and std_min <= std_median
    # n orthogonal unit vectors: 1 - 1/n exactly
    assert total_variance(np.eye(8)) == pytest.approx(1 - 1 / 8)


def test_low_rank_cloud_has_full_total_variance_but_low_spectrum_rank() -> None:
    """Dimensional collapse: vectors spread evenly over a 4-dimensional subspace of 64 dimensions.
    The spectrum rank sees it (about 4); the total variance does not (about 1, as an isotropic
    cloud), the mirror image of the cone above."""
    rng = np.random.default_rng(7)
    basis = np.linalg.qr(rng.normal(size=(64, 4)))[0].T  # 4 orthonormal directions in R^64
    low = rng.normal(size=(4000, 4)) @ basis
    assert total_variance(low) > 0.99
    assert effective_rank(variance_spectrum(l2(low))) < 4.1
    iso = rng.normal(size=(4000, 64))
    assert effective_rank(variance_spectrum(l2(iso))) > 55
    assert geometry({"xx": low}).per_language["xx"]["spectrum_rank"] < 4.1


def test_anisotropy_is_derived_from_total_variance() -> None:
    """For unit vectors the mean pairwise cosine is (n(1 - TV) - 1)/(n - 1): one measurement, so the
    report derives it; the brute-force mean over pairs agrees."""
    rng = np.random.default_rng(3)
    for x in (rng.normal(size=(50, 16)), rng.normal(size=(50, 16)) * 0.1 + 1.0):
        v = l2(x)
        cos = v @ v.T
        brute = (cos.sum() - np.trace(cos)) / (len(v) * (len(v) - 1))
        assert anisotropy_from_total_variance(total_variance(v), len(v)) == pytest.approx(brute, abs=1e-6)
        assert anisotropy(x) == pytest.approx(brute, abs=1e-6)
        row = geometry({"xx": x}).per_language["xx"]
        assert row["anisotropy"] == pytest.approx(brute, abs=1e-6)


def l2(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_cross_lingual_hubness_counts_english_hubs() -> None:
    rng = np.random.default_rng(6)
    en = rng.normal(size=(50, 16))
    xx = en + 0.01 * rng.normal(size=en.shape)  # each sentence nearest its own translation
    counts = cross_k_occurrence(xx, en, k=1)
    assert counts.sum() == 50 and counts.max() == 1
    hub = np.vstack([en, np.ones((1, 16))])
    crowd = np.ones((40, 16)) + 0.05 * rng.normal(size=(40, 16))
    assert cross_k_occurrence(crowd, hub, k=1)[-1] == 40


def test_explained_variance_curve() -> None:
    curve = explained_variance(np.array([3.0, 1.0, 0.0]))
    np.testing.assert_allclose(curve, [0.75, 1.0, 1.0])


def test_anisotropy_centred_cloud_and_narrow_cone() -> None:
    rng = np.random.default_rng(1)
    assert abs(anisotropy(rng.normal(size=(3000, 32)))) < 0.01
    cone = rng.normal(size=(3000, 32)) * 0.05 + np.ones(32)
    assert anisotropy(cone) > 0.95
    two = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # cosines 0, 1/sqrt2, 1/sqrt2
    assert anisotropy(two) == pytest.approx((2 / np.sqrt(2)) / 3)


def test_hubness_uniform_vs_one_hub() -> None:
    # Points on a circle: every point is a neighbour of its k nearest, equally often -> skew 0.
    angles = np.linspace(0, 2 * np.pi, 200, endpoint=False)
    circle = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    counts = k_occurrence(circle, k=4)
    assert counts.sum() == 200 * 4 and counts.min() == counts.max() == 4
    assert hubness_skew(circle, k=4) == 0.0
    # A central point that everyone sees as a near neighbour -> strong positive skew.
    rng = np.random.default_rng(2)
    cloud = rng.normal(size=(400, 32)) + 3.0
    cloud[0] = 3.0  # the mean direction: the cosine hub
    assert k_occurrence(cloud, k=10)[0] > 100
    assert hubness_skew(cloud, k=10) > 2.0


def test_language_share_overlap_vs_offset() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(500, 16)), rng.normal(size=(500, 16))
    assert language_share({"a": a, "b": b}) < 0.01
    offset = np.zeros(16)
    offset[0] = 50.0
    share = language_share({"a": a + offset, "b": b - offset})
    assert share > 0.95


def test_geometry_report_rows() -> None:
    rng = np.random.default_rng(4)
    res = geometry({"en": rng.normal(size=(100, 8)), "de": rng.normal(size=(100, 8)) + 2.0})
    assert set(res.per_language) == {"en", "de"}
    row = res.per_language["en"]
    assert row["n"] == 100 and 6 < row["spectrum_rank"] <= 8
    assert 0.8 < row["total_variance"] <= 1.0 and 0 < row["dim_std_min"] <= row["dim_std_median"]
    assert "cross_hubness_skew" in res.per_language["de"] and "cross_hubness_skew" not in row
    assert row["explained_variance"]["8"] == pytest.approx(1.0)
    assert res.language_share is not None and res.language_share > 0.15
    assert res.pooled["n"] == 200 and len(res.spectra["de"]) == 8
    with pytest.raises(ValueError):
        language_share({"en": rng.normal(size=(5, 3))})


def test_geometry_task_in_the_runner(tiny_model_dir: Path) -> None:
    from babelspace.evaluation.config import EvalConfig
    from babelspace.evaluation.runner import run_eval

    report = run_eval(
        EvalConfig(model=str(tiny_model_dir), tasks=["geometry"], langs=["de", "fr"], max_sentences=40)
    )
    r = report.tasks["geometry"]
    assert r.status == "ok"
    assert set(r.per_language) == {"en", "de", "fr"}
    assert r.per_language["de"]["n"] == 40
    assert 0.0 <= r.average["language_share"] <= 1.0
    assert r.average["spectrum_rank"] > 1.0
    assert 0.0 < r.average["total_variance"] <= 1.0
    assert r.per_language["de"]["cross_hubness_skew"] is not None


@pytest.mark.slow
def test_geometry_on_e5_small(e5_small_path: Path) -> None:
    from babelspace.evaluation.config import EvalConfig
    from babelspace.evaluation.runner import run_eval

    report = run_eval(
        EvalConfig(model=str(e5_small_path), tasks=["geometry"], langs=["de", "zh"], max_sentences=60)
    )
    r = report.tasks["geometry"]
    for lang in ("en", "de", "zh"):
        row = r.per_language[lang]
        assert 5.0 < row["spectrum_rank"] < 60.0  # 60 points in 384 dimensions
        assert 0.5 < row["anisotropy"] < 1.0  # e5 vectors live in a narrow cone
    # e5-small is multilingual but its languages are still partly apart
    assert 0.02 < r.average["language_share"] < 0.9
