"""The figures of one ``babelspace eval --plots DIR`` run: a bar chart per task, the geometry spectra and
a PCA map of the languages (drawing in :mod:`babelspace.evaluation.plots`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from babelspace.evaluation.data import subsample_indices
from babelspace.evaluation.results import TaskResult
from babelspace.evaluation.tasks.registry import TASKS
from babelspace.retrieval.knn import l2_normalize

__all__ = ["PCA_LANGS", "PCA_VERSES", "write_run_plots"]

#: Sentences per language in the PCA map (enough to see clusters, few enough to read the plot).
PCA_VERSES = 200
#: Languages in the PCA map, English included (more colours are hard to tell apart).
PCA_LANGS = 8
#: Tasks whose data is the default evaluation pairs: with any of them the run draws the PCA map.
PCA_TASKS = ("xsim", "xsimpp", "tatoeba", "bucc", "mse")


def _task_bars(results: dict[str, TaskResult], out_dir: Path) -> list[str]:
    from babelspace.evaluation.plots import plot_task_bars

    values = {name: r.main_values() for name, r in results.items() if r.status == "ok" and r.main_values()}
    titles, ylabels = {}, {}
    for name in values:
        spec = TASKS[name]
        titles[name] = f"{name} ({'higher' if spec.higher_is_better else 'lower'} is better)"
        ylabels[name] = f"{spec.metric} ({spec.unit})"
    return [str(p) for p in plot_task_bars(values, out_dir, ylabels=ylabels, titles=titles)]


def _pca_map(ctx: Any, out_dir: Path) -> str:
    from babelspace.evaluation.plots import plot_pca_languages

    data, seed = ctx.data, ctx.cfg.seed
    langs = list(data.groups)[: PCA_LANGS - 1]
    first = data.groups[langs[0]]
    idx = subsample_indices(len(first), PCA_VERSES, seed)
    vecs, labels = [ctx.cache.encode([first.en[i] for i in idx])], ["en"] * len(idx)
    for lang in langs:
        g = data.groups[lang]
        sel = subsample_indices(len(g), PCA_VERSES, seed)
        vecs.append(ctx.cache.encode([g.xx[i] for i in sel]))
        labels += [lang] * len(sel)
    title = f"{ctx.cfg.model}: sentence vectors (PCA, {len(idx)} sentences x {len(langs) + 1} languages)"
    return str(
        plot_pca_languages(
            l2_normalize(np.concatenate(vecs)), labels, out_dir / "pca_languages.png", title=title
        )
    )


def write_run_plots(ctx: Any, results: dict[str, TaskResult], out_dir: Path) -> list[str]:
    """Write the run's figures into ``out_dir``; returns their paths. ``ctx``: the runner."""
    written = _task_bars(results, out_dir)
    spectra = ctx.memo.get("geometry_spectra")
    if spectra:
        from babelspace.evaluation.plots import plot_spectra

        title = f"{ctx.cfg.model}: variance spectrum"
        written.append(str(plot_spectra(spectra, out_dir / "geometry_spectra.png", title=title)))
    if any(t in ctx.cfg.tasks for t in PCA_TASKS):
        written.append(_pca_map(ctx, out_dir))
    return written
