"""STS task: semantic textual similarity, Spearman x 100 of cosine vs gold (0-5).

Data: none offline; needs ``sts_files`` (STS17 ``score<TAB>s1<TAB>s2`` files or STSb files, told apart
by their number of fields). Protocol: Cer et al. 2017 (SemEval-2017 Task 1). Sets are macro-averaged.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from babelspace.data.lines import strict_lines
from babelspace.evaluation.formats.sts import StsData, read_sts17, read_stsb
from babelspace.evaluation.results import TaskResult
from babelspace.evaluation.tasks.spec import TaskContext, TaskSpec
from babelspace.metrics.sts import sts_spearman

logger = logging.getLogger(__name__)

#: Fields of an STS17 line (score, sentence 1, sentence 2); STSb lines have more.
STS17_FIELDS = 3


def read_sts_file(path: Path) -> StsData:
    """An STS17 file (three tab-separated fields) or an STSb file, told apart by its first line."""
    first = next((line for _, line in strict_lines(path) if line.strip()), "")
    if len(first.split("\t")) == STS17_FIELDS:
        return read_sts17(path)
    return read_stsb(path)


def sts_sets(ctx: TaskContext) -> dict[str, StsData]:
    """The STS files of the run, read once (shared with the ``bias`` task), keyed ``lang1-lang2``."""
    if "sts_sets" not in ctx.memo:
        sets: dict[str, StsData] = {}
        for f in ctx.cfg.sts_files:
            d = read_sts_file(Path(f))
            key = f"{d.lang1}-{d.lang2}"
            if key in sets:
                key = f"{key} ({d.name})"
            sets[key] = d
        ctx.memo["sts_sets"] = sets
    return ctx.memo["sts_sets"]


def encode_sets(ctx: TaskContext, sets: dict[str, StsData]) -> None:
    """Encode every sentence of ``sets`` in one call (one progress bar, full batches)."""
    ctx.cache.encode([t for d in sets.values() for t in (*d.s1, *d.s2)])


def run(ctx: TaskContext) -> TaskResult:
    res = TaskResult(
        "sts", config={"model": ctx.cfg.model, "similarity": "cosine", "score": "Spearman x 100"}
    )
    if not ctx.cfg.sts_files:
        return res.skip(
            "no STS files given (--sts FILE ...); there is no offline STS data, so no number is reported"
        )
    sets = sts_sets(ctx)
    encode_sets(ctx, sets)
    for key, d in sets.items():
        rho = sts_spearman(ctx.cache.encode(d.s1), ctx.cache.encode(d.s2), d.scores)
        res.per_language[key] = {"spearman": rho, "n": len(d), "file": d.name}
        logger.info("sts %s: %.2f", key, rho)
    res.average = {
        "spearman": float(np.mean([r["spearman"] for r in res.per_language.values()])),
        "average": "macro",
    }
    res.config["files"] = list(ctx.cfg.sts_files)
    res.n_sentences = sum(len(d) for d in sets.values())
    return res


SPEC = TaskSpec(
    name="sts",
    description="semantic textual similarity: Spearman x 100 of cosine vs gold (0-5)",
    metric="spearman",
    unit="x100",
    higher_is_better=True,
    column="sts rho",
    run=run,
)
