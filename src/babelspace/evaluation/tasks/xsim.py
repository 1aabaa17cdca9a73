"""xsim task: margin-based similarity-search error, xx -> en (and en -> xx with ``direction="both"``).

Data: the default evaluation pairs (Bible test books, English pool shared by all languages).
Protocol: LASER ``source/xsim.py``; Artetxe & Schwenk 2019 (arXiv 1811.01136). Languages are
micro-averaged (pooled errors).
"""

from __future__ import annotations

import logging
from typing import Any

from babelspace.evaluation.results import TaskResult
from babelspace.evaluation.tasks.spec import TaskContext, TaskSpec
from babelspace.metrics.xsim import XsimResult, xsim_both_directions, xsim_errors, xsim_multi

logger = logging.getLogger(__name__)


def xsim_row(r: XsimResult, prefix: str = "") -> dict[str, Any]:
    return {f"{prefix}error_rate": r.error_rate, f"{prefix}errors": r.errors, f"{prefix}n": r.n}


def run(ctx: TaskContext) -> TaskResult:
    cfg, data = ctx.cfg, ctx.data
    res = TaskResult(
        "xsim", config={**ctx.base_config(), "direction": cfg.direction, "data": data.description}
    )
    ctx.encode_groups(list(data.groups.values()))
    fwd: dict[str, XsimResult] = {}
    bwd: dict[str, XsimResult] = {}
    for lang, g in data.groups.items():
        xx, en = ctx.cache.encode(g.xx), ctx.cache.encode(g.en)
        if cfg.direction == "both":
            fwd[lang], bwd[lang] = xsim_both_directions(
                xx, en, margin=cfg.margin, k=cfg.k, x_texts=g.xx, y_texts=g.en
            )
        else:
            fwd[lang] = xsim_errors(xx, en, margin=cfg.margin, k=cfg.k, src_texts=g.xx, tgt_texts=g.en)
        row = xsim_row(fwd[lang])
        if lang in bwd:
            row.update(xsim_row(bwd[lang], "en2xx_"))
            row["both_error_rate"] = 100.0 * (fwd[lang].errors + bwd[lang].errors) / (2 * fwd[lang].n)
        res.per_language[lang] = row
        logger.info("xsim %s: %.2f%% (%d/%d)", lang, fwd[lang].error_rate, fwd[lang].errors, fwd[lang].n)
    res.average = {**xsim_row(xsim_multi(fwd)), "average": "micro"}
    if bwd:
        total_b = xsim_multi(bwd)
        res.average.update(xsim_row(total_b, "en2xx_"))
        n_all = res.average["n"] + total_b.n
        res.average["both_error_rate"] = 100.0 * (res.average["errors"] + total_b.errors) / n_all
    res.n_sentences = sum(len(g) for g in data.groups.values())
    return res


SPEC = TaskSpec(
    name="xsim",
    description="margin-based similarity-search error, xx -> en (and en -> xx with --direction both)",
    metric="error_rate",
    unit="%",
    higher_is_better=False,
    column="xsim err%",
    run=run,
)
