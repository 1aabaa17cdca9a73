"""Shared kNN search and margin scoring (babelspace.retrieval.knn)."""

from __future__ import annotations

import numpy as np
import pytest

from babelspace.retrieval.knn import Margin, knn_search, l2_normalize, margin_knn, margin_score, mean_knn_sim


def _random(n: int, d: int, seed: int) -> np.ndarray:
    return l2_normalize(np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32))


def test_l2_normalize_rows_have_unit_norm_and_zero_rows_stay_zero() -> None:
    x = np.array([[3.0, 4.0], [0.0, 0.0]])
    y = l2_normalize(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y[0], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_array_equal(y[1], [0.0, 0.0])
    assert x[0, 0] == 3.0  # input untouched


def test_knn_numpy_matches_brute_force() -> None:
    q, db = _random(23, 8, 0), _random(41, 8, 1)
    sims, ids = knn_search(q, db, 5, backend="numpy")
    full = q @ db.T
    expected_ids = np.argsort(-full, axis=1)[:, :5]
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(sims, np.take_along_axis(full, expected_ids, axis=1), rtol=1e-5, atol=1e-6)
    assert sims.dtype == np.float32 and ids.dtype == np.int64


@pytest.mark.parametrize("k", [1, 5, 17])
def test_faiss_and_numpy_backends_agree(k: int) -> None:
    q, db = _random(37, 16, 2), _random(101, 16, 3)
    s_f, i_f = knn_search(q, db, k, backend="faiss")
    s_n, i_n = knn_search(q, db, k, backend="numpy")
    np.testing.assert_array_equal(i_f, i_n)
    np.testing.assert_allclose(s_f, s_n, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["faiss", "numpy"])
def test_chunked_equals_unchunked(backend: str) -> None:
    q, db = _random(53, 12, 4), _random(97, 12, 5)
    s_full, i_full = knn_search(q, db, 6, backend=backend, chunk_size=10_000, query_chunk_size=10_000)
    # chunks smaller than both n and m, and smaller than k for the database
    for chunk, qchunk in [(16, 7), (5, 50), (1, 1)]:
        s, i = knn_search(q, db, 6, backend=backend, chunk_size=chunk, query_chunk_size=qchunk)
        np.testing.assert_array_equal(i, i_full)
        np.testing.assert_allclose(s, s_full, rtol=1e-5, atol=1e-6)


def test_k_larger_than_database_is_clamped() -> None:
    q, db = _random(4, 3, 6), _random(2, 3, 7)
    sims, ids = knn_search(q, db, 10, backend="numpy", chunk_size=1)
    assert sims.shape == ids.shape == (4, 2)
    assert set(ids[0].tolist()) == {0, 1}


def test_knn_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="dimension"):
        knn_search(np.zeros((2, 3)), np.zeros((2, 4)), 1)
    with pytest.raises(ValueError, match="backend"):
        knn_search(np.zeros((2, 3)), np.zeros((2, 3)), 1, backend="gpu")  # type: ignore[arg-type]


def test_mean_knn_sim() -> None:
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    db = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    np.testing.assert_allclose(mean_knn_sim(q, db, 2), [(1.0 + 0.6) / 2], rtol=1e-6)


def test_margin_score_formulas() -> None:
    assert margin_score(0.6, 0.65, 0.35, Margin.RATIO) == pytest.approx(1.2)
    assert margin_score(0.6, 0.65, 0.35, "distance") == pytest.approx(0.1)
    assert margin_score(0.6, 0.65, 0.35, Margin.ABSOLUTE) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        margin_score(0.6, 0.6, 0.6, "cosine")


def hub_case(scale: float = 0.8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """3 sources, 3 targets; target 2 is a hub. Returns (src, tgt, cosine matrix)."""
    cos = scale * np.array([[0.6, 0.1, 0.7], [0.1, 0.9, 0.6], [0.1, 0.1, 0.9]])
    tgt = np.zeros((3, 6))
    tgt[:, :3] = np.eye(3)
    src = np.zeros((3, 6))
    src[:, :3] = cos
    for i in range(3):
        src[i, 3 + i] = np.sqrt(1 - np.sum(cos[i] ** 2))
    return src.astype(np.float32), tgt.astype(np.float32), cos


def test_hub_case_realises_the_cosines() -> None:
    src, tgt, cos = hub_case()
    np.testing.assert_allclose(src @ tgt.T, cos, atol=1e-6)


@pytest.mark.parametrize("backend", ["faiss", "numpy"])
def test_margin_knn_hand_computed(backend: str) -> None:
    src, tgt, _ = hub_case(scale=1.0 / 1.25)
    # with k=2: fwd means (0.65, 0.75, 0.5), bwd means (0.35, 0.5, 0.8) before scaling
    scores, ids = margin_knn(src, tgt, k=2, margin=Margin.RATIO, backend=backend)
    assert ids[0].tolist() == [0, 2]  # the hub is the cosine favourite but loses on ratio margin
    np.testing.assert_allclose(scores[0], [0.6 / 0.5, 0.7 / 0.725], rtol=1e-5)
    scores_d, ids_d = margin_knn(src, tgt, k=2, margin="distance", backend=backend)
    assert ids_d[0].tolist() == [0, 2]
    np.testing.assert_allclose(scores_d[0], [0.8 * 0.1, 0.8 * -0.025], atol=1e-6)
    scores_a, ids_a = margin_knn(src, tgt, k=2, margin="absolute", backend=backend)
    assert ids_a[0].tolist() == [2, 0]
    np.testing.assert_allclose(scores_a[0], [0.8 * 0.7, 0.8 * 0.6], rtol=1e-5)


def test_margin_knn_more_candidates_than_k() -> None:
    src, tgt = _random(20, 8, 8), _random(30, 8, 9)
    scores, ids = margin_knn(src, tgt, k=3, candidates=30, backend="numpy")
    assert scores.shape == (20, 30)
    assert all(sorted(row) == list(range(30)) for row in ids.tolist())
    assert np.all(np.diff(scores, axis=1) <= 1e-7)
