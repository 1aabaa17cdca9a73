"""The before/after table that ends ``babelspace train`` on held-out parallel text.

For each language: the untrained student's own xx->en / en->xx accuracy, the trained student's own
accuracy, the trained student's xx vectors retrieving the *teacher's* English vectors (does the
student now live in the teacher's space?), the untrained student in the teacher's space (chance:
two unrelated spaces) and the teacher itself on both sides, for reference.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.encoder import encode
from babelspace.evaluation.tatoeba import top1_accuracy

logger = logging.getLogger(__name__)

COLUMNS = (
    "lang",
    "before xx>en",
    "before en>xx",
    "after xx>en",
    "after en>xx",
    "after xx>T(en)",
    "before xx>T(en)",
    "teacher xx>en",
    "teacher en>xx",
)


def held_out_texts(langs: Sequence[str] | None, n: int, seed: int) -> tuple[list[str], dict[str, list[str]]]:
    """``n`` test-book verses (the same verses for every language) from the offline Bible."""
    from babelspace.data.bible import bible_languages, bible_parallel_texts

    langs = [lang for lang in (langs or bible_languages()) if lang != "en"]
    en, per_lang = bible_parallel_texts(langs, "test")
    if n and len(en) > n:
        idx = np.sort(np.random.default_rng(seed).choice(len(en), n, replace=False))
        en = [en[i] for i in idx]
        per_lang = {k: [v[i] for i in idx] for k, v in per_lang.items()}
    return en, per_lang


def before_after_table(
    teacher: SentenceTransformer,
    before: SentenceTransformer,
    after: SentenceTransformer,
    en: Sequence[str],
    per_lang: dict[str, Sequence[str]],
    batch_size: int = 64,
) -> list[dict[str, float | str]]:
    def vecs(model: SentenceTransformer, texts: Sequence[str]) -> np.ndarray:
        return encode(model, texts, batch_size=batch_size, show_progress=False)

    logger.info("held-out table: %d verses x %d languages", len(en), len(per_lang))
    t_en, b_en, a_en = vecs(teacher, en), vecs(before, en), vecs(after, en)
    rows: list[dict[str, float | str]] = []
    for lang, texts in per_lang.items():
        t_xx, b_xx, a_xx = vecs(teacher, texts), vecs(before, texts), vecs(after, texts)
        rows.append(
            {
                "lang": lang,
                "before xx>en": top1_accuracy(b_xx, b_en),
                "before en>xx": top1_accuracy(b_en, b_xx),
                "after xx>en": top1_accuracy(a_xx, a_en),
                "after en>xx": top1_accuracy(a_en, a_xx),
                "after xx>T(en)": top1_accuracy(a_xx, t_en),
                "before xx>T(en)": top1_accuracy(b_xx, t_en),
                "teacher xx>en": top1_accuracy(t_xx, t_en),
                "teacher en>xx": top1_accuracy(t_en, t_xx),
            }
        )
    mean: dict[str, float | str] = {"lang": "mean"}
    for col in COLUMNS[1:]:
        mean[col] = float(np.mean([r[col] for r in rows]))
    rows.append(mean)
    return rows
