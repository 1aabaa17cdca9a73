"""xsim (LASER protocol) against hand-built cases and a brute-force implementation."""

from __future__ import annotations

import numpy as np
import pytest

from babelspace.metrics.xsim import XsimResult, xsim_both_directions, xsim_errors, xsim_multi
from babelspace.retrieval.knn import Margin


def hub_case(scale: float = 0.8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """3 sources, 3 targets; target 2 is a hub that plain cosine prefers for source 0 (same as test_eval_knn)."""
    cos = scale * np.array([[0.6, 0.1, 0.7], [0.1, 0.9, 0.6], [0.1, 0.1, 0.9]])
    tgt = np.zeros((3, 6))
    tgt[:, :3] = np.eye(3)
    src = np.zeros((3, 6))
    src[:, :3] = cos
    for i in range(3):
        src[i, 3 + i] = np.sqrt(1 - np.sum(cos[i] ** 2))
    return src.astype(np.float32), tgt.astype(np.float32), cos


def brute_force_xsim(
    src: np.ndarray, tgt: np.ndarray, margin: str, k: int, candidates: int | None = None
) -> np.ndarray:
    """Predictions from the full similarity matrix (no kNN library)."""
    s = src / np.linalg.norm(src, axis=1, keepdims=True)
    t = tgt / np.linalg.norm(tgt, axis=1, keepdims=True)
    sim = s.astype(np.float64) @ t.astype(np.float64).T
    a = np.sort(sim, axis=1)[:, ::-1][:, :k].mean(axis=1)  # each source over all targets
    b = np.sort(sim, axis=0)[::-1, :][:k, :].mean(axis=0)  # each target over all sources
    c = candidates or k
    preds = []
    for i in range(sim.shape[0]):
        cand = np.argsort(-sim[i], kind="stable")[:c]
        cos = sim[i, cand]
        denom = (a[i] + b[cand]) / 2
        score = {"ratio": cos / denom, "distance": cos - denom, "absolute": cos}[margin]
        preds.append(cand[np.argmax(score)])
    return np.array(preds)


@pytest.mark.parametrize("backend", ["faiss", "numpy"])
def test_hub_target_rejected_by_margin_both_directions(backend: str) -> None:
    src, tgt, _ = hub_case()
    expected_fwd = {Margin.ABSOLUTE: 1, Margin.RATIO: 0, Margin.DISTANCE: 0}
    for margin, errs in expected_fwd.items():
        fwd, bwd = xsim_both_directions(src, tgt, margin=margin, k=2, backend=backend)
        assert fwd.errors == errs, margin
        assert bwd.errors == 0, margin
        assert fwd.n == bwd.n == 3
        assert fwd.error_rate == pytest.approx(100 * errs / 3)
        # swapping the roles swaps the directions: a hub *source* now
        fwd2, bwd2 = xsim_both_directions(tgt, src, margin=margin, k=2, backend=backend)
        assert (fwd2.errors, bwd2.errors) == (0, errs), margin
    plain = xsim_errors(src, tgt, margin="absolute", k=2, backend=backend)
    assert plain.predictions.tolist() == [2, 1, 2]
    ratio = xsim_errors(src, tgt, margin="ratio", k=2, backend=backend)
    assert ratio.predictions.tolist() == [0, 1, 2]


@pytest.mark.parametrize("margin", ["ratio", "distance", "absolute"])
@pytest.mark.parametrize("backend", ["faiss", "numpy"])
def test_xsim_equals_brute_force(margin: str, backend: str) -> None:
    rng = np.random.default_rng(42)
    src = rng.standard_normal((60, 16)).astype(np.float32)
    tgt = np.concatenate([src + 1.3 * rng.standard_normal(src.shape), rng.standard_normal((15, 16))]).astype(
        np.float32
    )
    for k in (1, 4, 7):
        expected = brute_force_xsim(src, tgt, margin, k)
        result = xsim_errors(src, tgt, margin=margin, k=k, backend=backend, chunk_size=13)
        np.testing.assert_array_equal(result.predictions, expected)
        assert result.errors == int(np.sum(expected != np.arange(60)))
        assert 0 < result.errors < 60  # the case is neither trivial nor hopeless
    # margin over every target (not only the k nearest)
    full = xsim_errors(src, tgt, margin=margin, k=4, candidates=75, backend=backend)
    np.testing.assert_array_equal(full.predictions, brute_force_xsim(src, tgt, margin, 4, candidates=75))


def test_margin_reduces_errors_with_hubs() -> None:
    rng = np.random.default_rng(0)
    d = 32
    hub = rng.standard_normal(d)
    src = rng.standard_normal((200, d))
    tgt = src + 1.0 * rng.standard_normal((200, d)) + 1.5 * hub  # a shared direction makes targets hubby
    src = src + 1.5 * hub * rng.uniform(0, 1, (200, 1))
    plain = xsim_errors(src, tgt, margin="absolute")
    ratio = xsim_errors(src, tgt, margin="ratio")
    assert ratio.errors <= plain.errors


def test_text_errors_treat_duplicate_targets_as_right() -> None:
    tgt = np.eye(4, dtype=np.float32)
    tgt[3] = [0.9, 0.1, 0.0, 0.0]  # target 3 duplicates target 0's text, near it
    src = np.eye(4, dtype=np.float32)
    src[3] = [1.0, 0.0, 0.0, 0.05]  # source 3 lands on target 0
    texts = ["a cat", "a dog", "a bird", "a cat"]
    by_index = xsim_errors(src, tgt, margin="absolute", k=1)
    by_text = xsim_errors(src, tgt, margin="absolute", k=1, tgt_texts=texts, src_texts=["w", "x", "y", "z"])
    assert by_index.predictions[3] == 0
    assert by_index.errors == 1
    assert by_text.errors == 0
    other_texts = ["a cat", "a dog", "a bird", "a horse"]
    wrong = xsim_errors(
        src, tgt, margin="absolute", k=1, tgt_texts=other_texts, src_texts=["w", "x", "y", "z"]
    )
    assert wrong.errors == 1
    assert wrong.examples == [("z", "a cat", "a horse")]


def test_explicit_gold() -> None:
    src = np.eye(3, dtype=np.float32)
    tgt = np.eye(3, dtype=np.float32)[[2, 0, 1]]  # target j is source perm[j]
    res = xsim_errors(src, tgt, margin="absolute", k=1, gold=[1, 2, 0])
    assert res.errors == 0
    assert xsim_errors(src, tgt, margin="absolute", k=1).errors == 3
    with pytest.raises(ValueError, match="gold"):
        xsim_errors(src, tgt, gold=[0, 1])


def test_xsim_multi_is_micro_averaged() -> None:
    total = xsim_multi(
        {"de": XsimResult(1, 10, 10.0), "fr": XsimResult(9, 90, 10.0), "sw": XsimResult(50, 100, 50.0)}
    )
    assert (total.errors, total.n) == (60, 200)
    assert total.error_rate == pytest.approx(30.0)  # the macro average would be 23.3
    assert xsim_multi({}).error_rate == 0.0
