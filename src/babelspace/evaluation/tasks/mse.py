"""MSE task: distance between the student's vectors and the teacher's vector of the English side.

Data: the default evaluation pairs (student: translation and English; teacher: English), raw vectors.
Protocol: Reimers & Gurevych 2020 (arXiv 2004.09813), sentence-transformers ``MSEEvaluator``.
Translations are macro-averaged; the ``en`` row (student vs teacher on English) is apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from babelspace.evaluation.results import TaskResult
from babelspace.evaluation.tasks.spec import TaskContext, TaskSpec
from babelspace.metrics.mse import MseResult, mse_to_teacher

MSE_KEYS = ("elementwise_mse_x100", "mean_squared_l2")


def _row(r: MseResult) -> dict[str, Any]:
    return {"elementwise_mse_x100": r.elementwise_mse_x100, "mean_squared_l2": r.mean_squared_l2, "n": r.n}


def run(ctx: TaskContext) -> TaskResult:
    cfg, data = ctx.cfg, ctx.data
    res = TaskResult(
        "mse",
        config={
            "model": cfg.model,
            "teacher": cfg.teacher,
            "vectors": "raw (as the models output them)",
            "pairs": "student(translation) and student(English) vs teacher(English)",
            "data": data.description,
        },
    )
    ctx.encode_groups(list(data.groups.values()))
    en_pool = data.english_pool()
    t_en = ctx.teacher_cache.encode(en_pool)
    if t_en.shape[1] != ctx.cache.dim:
        return res.skip(f"student dimension {ctx.cache.dim} differs from teacher dimension {t_en.shape[1]}")
    t_of = dict(zip(en_pool, t_en, strict=True))
    for lang, g in data.groups.items():
        res.per_language[lang] = _row(
            mse_to_teacher(ctx.cache.encode(g.xx), np.stack([t_of[e] for e in g.en]))
        )
    r_en = mse_to_teacher(ctx.cache.encode(en_pool), t_en)
    res.per_language["en"] = _row(r_en)
    rows = [v for k, v in res.per_language.items() if k != "en"]
    res.average = {key: float(np.mean([r[key] for r in rows])) for key in MSE_KEYS} | {
        "average": "macro over translations (the 'en' row, student vs teacher on English, is apart)",
        "dim": r_en.dim,
    }
    res.n_sentences = sum(len(g) for g in data.groups.values())
    return res


SPEC = TaskSpec(
    name="mse",
    description="MSE between the student's vectors and the teacher's vector of the English side",
    metric="elementwise_mse_x100",
    unit="x100",
    higher_is_better=False,
    column="mse x100",
    run=run,
)
