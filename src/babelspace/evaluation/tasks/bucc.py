"""BUCC task: parallel-sentence mining F1, threshold tuned on the training split, applied to test.

Data: a BUCC-style task built from the evaluation pairs (:func:`babelspace.evaluation.formats.bucc.build_bucc_task`):
with the Bible and ``full``, the evaluated test verses hidden among ``bucc_ratio`` times as many
train-book verses; otherwise (other data, or the Bible's quick default) a share of each language's
pairs is gold and the rest are distractors, so BUCC encodes no text the other tasks have not. Or the BUCC 2018
layout (``bucc_dir``). Protocol: Zweigenbaum et al. 2018 (BUCC shared task); LASER ``tasks/bucc``.
Languages are macro-averaged.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.errors import ResourceError
from babelspace.evaluation.data import EvalData
from babelspace.evaluation.formats.bucc import build_bucc_task, read_bucc
from babelspace.evaluation.results import TaskResult
from babelspace.evaluation.tasks.spec import TaskContext, TaskSpec
from babelspace.metrics.bucc import (
    BuccSplit,
    BuccTask,
    apply_threshold,
    bucc_eval_candidates,
    mine_candidates,
    tune_threshold,
)

logger = logging.getLogger(__name__)

#: Books never used as BUCC distractors: Matthew (40) and Luke (42) retell most of Mark (41, a test
#: book), so their verses could be near-translations of gold verses.
BUCC_DISTRACTOR_EXCLUDED_BOOKS: tuple[int, ...] = (40, 42)

SCORED_KEYS = ("f1", "precision", "recall", "train_f1")


def _bible_tasks(data: EvalData, ratio: float, seed: int) -> tuple[dict[str, BuccTask], str]:
    from babelspace.data.bible import bible_parallel_texts, bible_verses

    en_train, xx_train = bible_parallel_texts(list(data.groups), "train")
    excluded = {
        t for (book, _, _), t in bible_verses("en", "train").items() if book in BUCC_DISTRACTOR_EXCLUDED_BOOKS
    }
    keep = [i for i, t in enumerate(en_train) if t not in excluded]
    d_en = [en_train[i] for i in keep]
    tasks = {
        lang: build_bucc_task(
            g.xx,
            g.en,
            [xx_train[lang][i] for i in keep],
            d_en,
            ratio=ratio,
            seed=seed,
            src_lang=lang,
            tgt_lang="en",
            distractors_parallel=True,
        )  # fmt: skip
        for lang, g in data.groups.items()
    }
    desc = (
        f"BUCC-style task from the Bible: the {len(next(iter(data.groups.values())))} evaluated test "
        f"verses per language, split in halves (training/test, seed {seed}), each hidden among "
        f"{ratio:g}x as many unrelated train-book verses per side (distractor sides drawn from "
        "disjoint verses, so no distractor translates another; Matthew and Luke excluded)"
    )
    return tasks, desc


def _corpus_tasks(data: EvalData, ratio: float, seed: int) -> tuple[dict[str, BuccTask], str]:
    tasks: dict[str, BuccTask] = {}
    for lang, g in data.groups.items():
        # n = gold + 2 * ratio * gold distractor positions (halves per side)
        n_gold = max(2, int(len(g) / (1 + 2 * ratio)))
        if n_gold >= len(g):
            logger.warning("bucc %s: too few pairs (%d) to hide gold pairs; skipped", lang, len(g))
            continue
        order = np.random.default_rng(seed).permutation(len(g))
        gold, rest = g.subset(order[:n_gold]), g.subset(order[n_gold:])
        tasks[lang] = build_bucc_task(
            gold.xx, gold.en, rest.xx, rest.en, ratio=ratio, seed=seed, src_lang=lang, tgt_lang="en",
            distractors_parallel=True,
        )  # fmt: skip
    desc = (
        f"BUCC-style task from {data.name}: 1/(1+2*{ratio:g}) of each language's pairs are gold "
        "(split in halves training/test), the others are distractors (sides from disjoint pairs)"
    )
    return tasks, desc


def _dir_tasks(directory: Path, langs: list[str] | None) -> tuple[dict[str, BuccTask], str]:
    if not langs:
        langs = sorted({p.name.split("-")[0] for p in directory.rglob("*-en.training.*")})
        if not langs:
            raise ResourceError(f"{directory}: no BUCC files named xx-en.training.xx found")
    tasks = {
        lang: BuccTask(
            read_bucc(directory, lang, "training"), read_bucc(directory, lang, "test", require_gold=False)
        )
        for lang in langs
    }
    return tasks, f"BUCC 2018 layout in {directory}"


def _score(ctx: TaskContext, lang: str, task: BuccTask, res: TaskResult) -> dict[str, Any]:
    """One language's row: F1 on test with the threshold tuned on training (or training only)."""
    cfg = ctx.cfg
    train_c, test_c = (
        mine_candidates(ctx.cache.encode(s.src_texts), ctx.cache.encode(s.tgt_texts), cfg.k, cfg.margin)
        for s in (task.training, task.test)
    )
    if task.test.gold is not None:
        r = bucc_eval_candidates(train_c, task.training.gold_indices(), test_c, task.test.gold_indices())
        return {
            "f1": r.f1,
            "precision": r.precision,
            "recall": r.recall,
            "threshold": r.threshold,
            "train_f1": r.train_f1,
            "test_gold": len(task.test.gold),
        }
    t, _, _, train_f1 = tune_threshold(train_c, task.training.gold_indices())
    res.notes.append(
        f"{lang}: no test gold file; test F1 cannot be computed (train_f1 is tuned on the same data: optimistic)"
    )
    return {
        "f1": None,
        "precision": None,
        "recall": None,
        "threshold": t,
        "train_f1": train_f1,
        "test_pairs_above_threshold": len(apply_threshold(test_c, t)),
    }


def _sizes(task: BuccTask) -> dict[str, Any]:
    return {
        "training_sentences": [len(task.training.src_texts), len(task.training.tgt_texts)],
        "test_sentences": [len(task.test.src_texts), len(task.test.tgt_texts)],
        "training_gold": len(task.training.gold or []),
    }


def run(ctx: TaskContext) -> TaskResult:
    cfg = ctx.cfg
    if cfg.bucc_dir:
        tasks, desc = _dir_tasks(Path(cfg.bucc_dir), list(cfg.langs) if cfg.langs else None)
    elif ctx.data.bible and cfg.full:
        tasks, desc = _bible_tasks(ctx.data, cfg.bucc_ratio, cfg.seed)
    else:  # user data, or the quick default: distractors from the evaluated pairs (already encoded)
        tasks, desc = _corpus_tasks(ctx.data, cfg.bucc_ratio, cfg.seed)
        if ctx.data.bible:
            desc += "; quick default (--full: hidden among train-book verses)"
    res = TaskResult(
        "bucc",
        config={
            **ctx.base_config(),
            "candidates": "forward + backward, greedy one-to-one",
            "threshold": "tuned on the training split, applied to test",
            "data": desc,
        },
    )
    if not cfg.bucc_dir:
        res.config["distractor_ratio"] = cfg.bucc_ratio
    splits: list[BuccSplit] = [s for t in tasks.values() for s in (t.training, t.test)]
    ctx.cache.encode([x for s in splits for x in (*s.src_texts, *s.tgt_texts)])
    for lang, task in tasks.items():
        row = _score(ctx, lang, task, res)
        res.per_language[lang] = row | _sizes(task)
        logger.info("bucc %s: F1 %s (train F1 %.2f)", lang, row["f1"], row["train_f1"])
    rows = list(res.per_language.values())
    res.n_sentences = sum(sum(r["training_sentences"]) + sum(r["test_sentences"]) for r in rows)
    scored = [r for r in rows if r["f1"] is not None]
    if scored:
        res.average = {key: float(np.mean([r[key] for r in scored])) for key in SCORED_KEYS} | {
            "average": "macro"
        }
    else:
        res.average = {"f1": None, "train_f1": float(np.mean([r["train_f1"] for r in rows]))}
    return res


SPEC = TaskSpec(
    name="bucc",
    description="parallel-sentence mining F1, threshold tuned on the training split, applied to test",
    metric="f1",
    unit="%",
    higher_is_better=True,
    column="bucc F1",
    run=run,
)
