"""The default evaluation pairs of ``babelspace eval``, grouped by language.

With no ``data`` the default is the offline Bible's test books (:data:`babelspace.data.TEST_BOOKS`)
for every requested language, each aligned with the *same* English verses (one shared English pool).
``data`` takes ``--data`` values as training does (:func:`babelspace.data.mix.parse_data_items`, no
weights): ``bible``, TSV, JSON Lines/JSON, CSV and Parquet files, ``aligned:SRC_FILE+TGT_FILE``
line-aligned files, Hugging Face dataset folders, several of them joined by commas or given as a list,
each read by :func:`babelspace.data.readers.load_parallel`; pairs are grouped by their non-English
language and each text is kept once per language (:func:`babelspace.data.pairs.unique_text_pairs`).
``max_sentences`` keeps a seeded random subset (the same verses for every language of the Bible).
Task-specific sources (``tatoeba_dir``, ``bucc_dir``, ``xsimpp_files``, ``sts_files``) are read by
their tasks in :mod:`babelspace.evaluation.tasks`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from babelspace.errors import BabelspaceError, ResourceError

__all__ = ["EvalData", "LangPairs", "load_eval_data", "subsample_indices"]

logger = logging.getLogger(__name__)


@dataclass
class LangPairs:
    """Aligned sentences of one language with its pivot (English): ``xx[i]`` translates ``en[i]``.
    Texts are unique within each list."""

    lang: str
    en: list[str]
    xx: list[str]

    def __len__(self) -> int:
        return len(self.en)

    def subset(self, idx: Iterable[int]) -> LangPairs:
        idx = list(idx)
        return LangPairs(self.lang, [self.en[i] for i in idx], [self.xx[i] for i in idx])


@dataclass
class EvalData:
    """The evaluation pairs, grouped by language."""

    name: str
    groups: dict[str, LangPairs]
    bible: bool = False
    description: str = ""

    def english_pool(self) -> list[str]:
        """Every distinct English text of every language, in first-seen order."""
        return list(dict.fromkeys(t for g in self.groups.values() for t in g.en))

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "languages": list(self.groups),
            "pairs_per_language": {lang: len(g) for lang, g in self.groups.items()},
            "english_pool": len(self.english_pool()),
            "shared_english_pool": self.bible,
        }


def subsample_indices(n: int, max_n: int | None, seed: int) -> np.ndarray:
    """Sorted seeded random subset of ``range(n)`` of size ``max_n`` (all of it when ``n <= max_n``)."""
    if max_n is None or n <= max_n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, max_n, replace=False))


def subset_description(desc: str, max_sentences: int | None, seed: int) -> str:
    """``desc`` with the subset it was cut to, when there is one."""
    if max_sentences:
        desc += f" (at most {max_sentences} pairs per language, seed {seed})"
    return desc


def _bible_groups(langs: Sequence[str] | None, max_sentences: int | None, seed: int) -> dict[str, LangPairs]:
    from babelspace.data.bible import bible_parallel_texts

    try:
        en, per_lang = bible_parallel_texts(langs, "test") if langs else bible_parallel_texts(None, "test")
    except ValueError as e:  # e.g. --langs en
        raise BabelspaceError(f"Bible evaluation data: {e}") from e
    idx = subsample_indices(len(en), max_sentences, seed)
    en_sub = [en[i] for i in idx]
    return {lang: LangPairs(lang, en_sub, [texts[i] for i in idx]) for lang, texts in per_lang.items()}


def unique_pairs(g: LangPairs) -> LangPairs:
    """``g`` with each English and each other-language text once (first pair kept)."""
    from babelspace.data.pairs import unique_text_pairs  # lazily: babelspace.data loads torch

    return g.subset(unique_text_pairs(zip(g.en, g.xx, strict=True)))


def _corpus_groups(corpus: Any) -> dict[str, LangPairs]:
    """Pairs of a corpus grouped by their non-English language, English first, each text once."""
    groups: dict[str, LangPairs] = {}
    for p in corpus:
        if p.src_lang == "en":
            lang, en, xx = p.tgt_lang, p.src, p.tgt
        elif p.tgt_lang == "en":
            lang, en, xx = p.src_lang, p.tgt, p.src
        else:  # no English side: the source plays the pivot
            lang, en, xx = f"{p.src_lang}-{p.tgt_lang}", p.src, p.tgt
        group = groups.setdefault(lang, LangPairs(lang, [], []))
        group.en.append(en)
        group.xx.append(xx)
    return {lang: unique_pairs(g) for lang, g in groups.items()}


def _bible_data(cfg: Any) -> EvalData:
    cap = cfg.bible_max_sentences()
    groups = _bible_groups(cfg.langs, cap, cfg.seed)
    n = len(next(iter(groups.values())))
    desc = (
        f"offline Bible, test books, {n} verses per language"
        + (f" (seeded subset, seed {cfg.seed})" if cap else "")
        + ", one English pool shared by every language"
    )
    if cfg.max_sentences is None and not cfg.full:
        desc += f"; quick default: at most {cap} verses per language (--full: every test verse)"
    return EvalData("bible-test", groups, bible=True, description=desc)


def load_eval_data(cfg: Any) -> EvalData:
    """The default evaluation pairs of an :class:`~babelspace.evaluation.config.EvalConfig`: Bible test
    books, or the corpora of ``cfg.data``."""
    from babelspace.data.mix import parse_data_items  # lazily: babelspace.data loads torch

    specs = [item.name for item in parse_data_items(cfg.data, weights=False)] if cfg.data else ["bible"]
    if specs == ["bible"]:
        return _bible_data(cfg)
    from babelspace.data.readers import load_parallel

    merged: dict[str, LangPairs] = {}
    for spec in specs:
        if spec == "bible":
            part = _bible_groups(cfg.langs, None, cfg.seed)
        else:
            corpus = load_parallel(
                spec, langs=cfg.langs, split="test", src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang
            )
            part = _corpus_groups(corpus)
        for lang, g in part.items():
            m = merged.setdefault(lang, LangPairs(lang, [], []))
            m.en.extend(g.en)
            m.xx.extend(g.xx)
    groups = {}
    for lang, g in merged.items():
        # again across specs (retrieval needs unique targets), then the subset
        unique = unique_pairs(g)
        idx = subsample_indices(len(unique), cfg.max_sentences, cfg.seed)
        if len(idx) < 2:
            logger.warning("%s: only %d pair(s) in the evaluation data; language dropped", lang, len(idx))
            continue
        groups[lang] = unique.subset(idx)
    if not groups:
        raise ResourceError(
            f"no evaluation pairs in {specs}" + (f" for languages {cfg.langs}" if cfg.langs else "")
        )
    desc = subset_description("user data: " + ", ".join(specs), cfg.max_sentences, cfg.seed)
    return EvalData(",".join(specs), dict(sorted(groups.items())), bible=False, description=desc)
