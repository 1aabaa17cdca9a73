"""The before/after table on held-out parallel text, as an evaluator: built with its sentences and the baselines, called with the trained model.

For each language: the untrained student's own xx->en / en->xx accuracy, the trained student's own
accuracy, the trained student's xx vectors retrieving the *teacher's* English vectors (does the
student now live in the teacher's space?), the untrained student in the teacher's space (chance:
two unrelated spaces) and the teacher itself on both sides, for reference. A last row gives the
95% confidence half-width of each mean over the verses drawn (:func:`mean_ci`).

:class:`HeldOutEvaluator` has the shape of sentence-transformers' ``TranslationEvaluator``: it is
built with its sentences (English and per language), the teacher's English vectors and the baseline
columns (teacher, untrained student: :mod:`babelspace.evaluation.held_out_baselines` ships, caches or
encodes them), and called with the trained model; it returns a metrics dict, and :meth:`table`
the rows. Each distinct text is encoded once per model.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.data.bible import bible_languages, bible_parallel_texts
from babelspace.metrics.sts import cosine_rowwise
from babelspace.metrics.tatoeba import top1_accuracy
from babelspace.models.encoder import encode

logger = logging.getLogger(__name__)

Vectors = tuple[np.ndarray, dict[str, np.ndarray]]

#: The label of the last row: the 95% confidence half-width of each column's mean.
CI_ROW = "±95% CI"
#: Key of the ``mean`` row (only): mean cosine between the trained model's and the teacher's vector of
#: the same English test verse, the drop-in check (1.0 would be the teacher itself).
DROP_IN_COSINE = "en cos T(en)"
_Z95 = 1.959964

COLUMNS = (
    "lang",
    "before xx>en",
    "before en>xx",
    "after xx>en",
    "after en>xx",
    "after xx>T(en)",
    "centred xx>T(en)",
    "before xx>T(en)",
    "teacher xx>en",
    "teacher en>xx",
)
#: The columns that depend only on the teacher and the untrained student (cached, shipped).
BASELINE_COLUMNS = ("before xx>en", "before en>xx", "before xx>T(en)", "teacher xx>en", "teacher en>xx")


def held_out_texts(langs: Sequence[str] | None, n: int, seed: int) -> tuple[list[str], dict[str, list[str]]]:
    """``n`` test-book verses (the same verses for every language) from the offline Bible."""
    langs = [lang for lang in (langs or bible_languages()) if lang != "en"]
    en, per_lang = bible_parallel_texts(langs, "test")
    if n and len(en) > n:
        idx = np.sort(np.random.default_rng(seed).choice(len(en), n, replace=False))
        en = [en[i] for i in idx]
        per_lang = {k: [v[i] for i in idx] for k, v in per_lang.items()}
    return en, per_lang


def encode_texts(
    model: SentenceTransformer,
    en: Sequence[str],
    per_lang: dict[str, Sequence[str]],
    batch_size: int,
    normalize: bool = True,
) -> Vectors:
    """Each distinct text of every language encoded once, in one call (sorted by length across
    languages, so batches pad little), then handed back per language."""
    distinct = list(dict.fromkeys([*en, *(t for texts in per_lang.values() for t in texts)]))
    vecs = encode(
        model, distinct, batch_size=batch_size, show_progress=len(distinct) > 1000, normalize=normalize
    )
    row = {t: i for i, t in enumerate(distinct)}

    def take(texts: Sequence[str]) -> np.ndarray:
        return vecs[[row[t] for t in texts]] if len(texts) else np.zeros((0, vecs.shape[1]), vecs.dtype)

    return take(en), {lang: take(texts) for lang, texts in per_lang.items()}


def baseline_columns(teacher: Vectors, before: Vectors) -> dict[str, dict[str, float]]:
    """Per language, the :data:`BASELINE_COLUMNS` from the teacher's and the untrained student's
    vectors."""
    (t_en, t_xx), (b_en, b_xx) = teacher, before
    return {
        lang: {
            "before xx>en": top1_accuracy(b_xx[lang], b_en),
            "before en>xx": top1_accuracy(b_en, b_xx[lang]),
            "before xx>T(en)": top1_accuracy(b_xx[lang], t_en),
            "teacher xx>en": top1_accuracy(t_xx[lang], t_en),
            "teacher en>xx": top1_accuracy(t_en, t_xx[lang]),
        }
        for lang in t_xx
    }


def table_rows(
    baselines: dict[str, dict[str, float]],
    teacher_en: np.ndarray,
    after: Vectors,
    shift: np.ndarray | None = None,
    sizes: dict[str, int] | None = None,
) -> list[dict[str, float | str]]:
    """The final table: a row per language, the ``mean`` row and the :data:`CI_ROW`. ``after``
    holds the trained model's raw vectors as exported; ``shift`` (the teacher mean the export added
    back, or None) is subtracted for the ``centred xx>T(en)`` column: the same weights queried in the
    mean-centred space against the teacher's raw English vectors. ``sizes``: verses per language
    (default: as many as ``teacher_en`` has)."""
    a_en, a_xx = after
    centre = 0.0 if shift is None else np.asarray(shift, dtype=np.float32)
    rows: list[dict[str, float | str]] = []
    for lang, base in baselines.items():
        row: dict[str, float | str] = {
            "lang": lang,
            "after xx>en": top1_accuracy(a_xx[lang], a_en),
            "after en>xx": top1_accuracy(a_en, a_xx[lang]),
            "after xx>T(en)": top1_accuracy(a_xx[lang], teacher_en),
            "centred xx>T(en)": top1_accuracy(a_xx[lang] - centre, teacher_en),
            **base,
        }
        rows.append({col: row[col] for col in COLUMNS})
    n = [int((sizes or {}).get(str(r["lang"]), len(teacher_en))) for r in rows]
    mean: dict[str, float | str] = {"lang": "mean"}
    ci: dict[str, float | str] = {"lang": CI_ROW}
    for col in COLUMNS[1:]:
        accs = [float(r[col]) for r in rows]
        mean[col] = float(np.mean(accs))
        ci[col] = mean_ci(accs, n)
    # rounded: cached and freshly encoded teacher vectors differ in the 8th digit
    mean[DROP_IN_COSINE] = round(float(np.mean(cosine_rowwise(a_en, teacher_en))), 4)
    return [*rows, mean, ci]


def mean_ci(accuracies: Sequence[float], sizes: Sequence[int]) -> float:
    """The 95% half-width (percentage points) of the mean of per-language top-1 accuracies (in %),
    each over ``sizes[i]`` verses: normal approximation of the binomial sampling error of the verses
    drawn, the languages fixed, ``1.96 * sqrt(sum p(1-p)/n) / L``."""
    p = np.asarray(accuracies, dtype=np.float64) / 100.0
    n = np.maximum(np.asarray(sizes, dtype=np.float64), 1.0)
    if not len(p):
        return 0.0
    return float(100.0 * _Z95 * np.sqrt(np.sum(p * (1.0 - p) / n)) / len(p))


def table_from_vectors(
    teacher: Vectors, before: Vectors, after: Vectors, shift: np.ndarray | None = None
) -> list[dict[str, float | str]]:
    """The final table from each model's (English vectors, {lang: vectors}) (:func:`table_rows`)."""
    sizes = {lang: len(v) for lang, v in teacher[1].items()}
    return table_rows(baseline_columns(teacher, before), teacher[0], after, shift, sizes)


def before_after_table(
    teacher: SentenceTransformer,
    before: SentenceTransformer,
    after: SentenceTransformer,
    en: Sequence[str],
    per_lang: dict[str, Sequence[str]],
    batch_size: int = 64,
) -> list[dict[str, float | str]]:
    """The final table from three loaded models (every text encoded by each; no cache)."""
    logger.info("held-out table: %d verses x %d languages", len(en), len(per_lang))
    vecs = [encode_texts(m, en, per_lang, batch_size) for m in (teacher, before, after)]
    return table_from_vectors(*vecs)


class HeldOutEvaluator:
    """The held-out table of one trained model (sentence-transformers' evaluator shape).

    ``en`` / ``per_lang``: the test sentences (the same verses in every language); ``teacher_en``:
    the teacher's English vectors (the ``xx>T(en)`` columns query them); ``baselines``: per
    language the :data:`BASELINE_COLUMNS`. Calling it with a model returns ``{"<lang>/<column>":
    accuracy}`` for every row (``mean`` and :data:`CI_ROW` included) and :data:`DROP_IN_COSINE`;
    its primary metric is the mean of the trained student's xx vectors retrieving the teacher's
    English ones."""

    primary_metric = "mean/after xx>T(en)"

    def __init__(
        self,
        en: Sequence[str],
        per_lang: dict[str, Sequence[str]],
        teacher_en: np.ndarray,
        baselines: dict[str, dict[str, float]],
        batch_size: int = 64,
    ) -> None:
        self.en, self.per_lang = list(en), {lang: list(t) for lang, t in per_lang.items()}
        self.teacher_en = teacher_en
        self.baselines = baselines
        self.batch_size = batch_size

    def table(
        self, model: SentenceTransformer, shift: np.ndarray | None = None
    ) -> list[dict[str, float | str]]:
        """The rows of ``model``'s table (its raw vectors as exported; ``shift``: the teacher mean
        its export added back, or None)."""
        after = encode_texts(model, self.en, self.per_lang, self.batch_size, normalize=False)
        sizes = {lang: len(t) for lang, t in self.per_lang.items()}
        return table_rows(self.baselines, self.teacher_en, after, shift, sizes)

    def __call__(self, model: SentenceTransformer, shift: np.ndarray | None = None) -> dict[str, float]:
        return table_metrics(self.table(model, shift))


def table_metrics(rows: Sequence[dict[str, float | str]]) -> dict[str, float]:
    """The rows of a table as one flat metrics dict (``"<lang>/<column>"``, and :data:`DROP_IN_COSINE`)."""
    out: dict[str, float] = {}
    for row in rows:
        for col, value in row.items():
            if col == "lang":
                continue
            out[DROP_IN_COSINE if col == DROP_IN_COSINE else f"{row['lang']}/{col}"] = float(value)
    return out
