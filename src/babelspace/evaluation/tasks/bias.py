"""Language-bias task: Spearman on the joined STS sets vs the mean of the per-set Spearman.

Data: none offline; needs at least two ``sts_files``. Protocol: Reimers & Gurevych 2020
(arXiv 2004.09813), section 7: a positive drop means scores depend on the language pair.
"""

from __future__ import annotations

from babelspace.evaluation.results import TaskResult
from babelspace.evaluation.tasks.spec import TaskContext, TaskSpec
from babelspace.evaluation.tasks.sts import encode_sets, sts_sets
from babelspace.metrics.sts import language_bias

#: Fewest STS sets that a language bias compares.
MIN_SETS = 2


def run(ctx: TaskContext) -> TaskResult:
    files = ctx.cfg.sts_files
    res = TaskResult("bias", config={"model": ctx.cfg.model, "files": list(files)})
    if len(files) < MIN_SETS:
        return res.skip(
            f"language bias needs at least 2 STS files (--sts), got {len(files)}; there is no offline STS data"
        )
    sets = sts_sets(ctx)
    encode_sets(ctx, sets)
    r = language_bias(
        {k: (ctx.cache.encode(d.s1), ctx.cache.encode(d.s2), d.scores) for k, d in sets.items()}
    )
    res.per_language = {k: {"spearman": v, "n": len(sets[k])} for k, v in r.per_set.items()}
    res.average = {"drop": r.drop, "joined": r.joined, "mean_per_set": r.mean_per_set}
    res.n_sentences = sum(len(d) for d in sets.values())
    return res


SPEC = TaskSpec(
    name="bias",
    description="language bias: Spearman on the joined STS sets vs the mean of per-set Spearman",
    metric="drop",
    unit="x100",
    higher_is_better=False,
    column="bias drop",
    run=run,
)
