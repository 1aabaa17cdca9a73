"""Figures of evaluation results: per-language bar charts and a 2-D PCA map of sentence vectors.

matplotlib is optional (``pip install babelspace[plots]``) and imported only when a figure is drawn.
Figures are rendered with the Agg canvas directly, so the global pyplot backend is never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.errors import ResourceError

logger = logging.getLogger(__name__)


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ResourceError(
            "plots need matplotlib: pip install 'babelspace[plots]' (or pip install matplotlib)"
        ) from e
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    logger.info("wrote %s", path)
    return path


def plot_language_bars(
    values: Mapping[str, float],
    path: str | Path,
    *,
    title: str = "",
    ylabel: str = "",
    sort: bool = True,
) -> Path:
    """Bar chart of one task's score per language (``{lang: value}``), saved to ``path`` (PNG by suffix)."""
    items = sorted(values.items(), key=lambda kv: kv[1], reverse=True) if sort else list(values.items())
    fig = _figure(max(4.0, 0.35 * len(items) + 1.5), 3.5)
    ax = fig.add_subplot()
    ax.bar([k for k, _ in items], [float(v) for _, v in items], color="tab:blue")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=90 if len(items) > 12 else 0)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_task_bars(
    results: Mapping[str, Mapping[str, float]],
    out_dir: str | Path,
    *,
    ylabels: Mapping[str, str] | None = None,
    titles: Mapping[str, str] | None = None,
) -> list[Path]:
    """One bar chart per task from ``{task: {lang: value}}``, written as ``out_dir/{task}.png``
    (title: ``titles[task]``, default the task name)."""
    out_dir = Path(out_dir)
    ylabels, titles = ylabels or {}, titles or {}
    return [
        plot_language_bars(
            values, out_dir / f"{task}.png", title=titles.get(task, task), ylabel=ylabels.get(task, "")
        )
        for task, values in results.items()
    ]


def pca_2d(x: np.ndarray) -> np.ndarray:
    """Project rows of ``x`` on their first two principal components (centred, via SVD): [n, 2]."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"PCA needs a 2-D array with at least two rows, got shape {x.shape}")
    centred = x - x.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    comps = vt[:2]
    proj = centred @ comps.T
    if proj.shape[1] < 2:
        proj = np.pad(proj, ((0, 0), (0, 2 - proj.shape[1])))
    return proj


def plot_pca_languages(
    embeddings: np.ndarray,
    languages: Sequence[str],
    path: str | Path,
    *,
    title: str = "Sentence vectors (PCA)",
    max_points: int = 5000,
    seed: int = 0,
) -> Path:
    """2-D PCA scatter of sentence vectors coloured by language; at most ``max_points`` (random subset)."""
    emb = np.asarray(embeddings)
    if len(languages) != emb.shape[0]:
        raise ValueError(f"{len(languages)} language labels for {emb.shape[0]} vectors")
    idx = np.arange(emb.shape[0])
    if emb.shape[0] > max_points:
        idx = np.sort(np.random.default_rng(seed).choice(emb.shape[0], max_points, replace=False))
    proj = pca_2d(emb[idx])
    langs = np.asarray(languages, dtype=object)[idx]
    fig = _figure(6.0, 5.0)
    ax = fig.add_subplot()
    for lang in sorted(set(langs.tolist())):
        mask = langs == lang
        ax.scatter(proj[mask, 0], proj[mask, 1], s=8, alpha=0.6, label=lang)
    ax.set_title(title)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.legend(markerscale=2, fontsize="small", ncols=2 if len(set(langs.tolist())) > 10 else 1)
    return _save(fig, path)


def plot_spectra(spectra: Mapping[str, list[float]], path: str | Path, title: str = "") -> Path:
    """Explained-variance curves, one per language (matplotlib needed, as for the other plots)."""
    fig = _figure(7.0, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    for lang, curve in spectra.items():
        ax.plot(np.arange(1, len(curve) + 1), curve, label=lang, linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("number of principal components")
    ax.set_ylabel("share of variance explained")
    ax.set_ylim(0, 1.01)
    ax.set_title(title or "variance spectrum per language")
    if len(spectra) <= 12:
        ax.legend(fontsize=7)
    return _save(fig, path)
