"""Tatoeba translation retrieval (Artetxe & Schwenk 2019, "Massively Multilingual Sentence
Embeddings for Zero-Shot Cross-Lingual Transfer and Beyond", TACL; LASER's ``data/tatoeba/v1``).

Protocol: up to 1,000 aligned sentences per language with English; L2-normalise, cosine, top-1
(plain arg-max, no margin). Accuracy in % in both directions. sentence-transformers reports the mean of
both directions, MTEB only xx -> en; :class:`TatoebaResult` carries all three.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from babelspace.data.lines import strict_lines
from babelspace.errors import CorpusFormatError, ResourceError
from babelspace.evaluation.knn import Backend, knn_search, l2_normalize

logger = logging.getLogger(__name__)

_FILE = re.compile(r"^tatoeba\.([a-z]{3})-eng\.\1$")


@dataclass
class TatoebaResult:
    """Top-1 accuracies in % (0-100)."""

    xx_to_en: float
    en_to_xx: float
    mean: float


@dataclass
class TatoebaPair:
    """Aligned sentences of one language and English (``xx[i]`` translates ``en[i]``)."""

    lang: str
    xx: list[str]
    en: list[str]


def top1_accuracy(queries: np.ndarray, targets: np.ndarray, *, backend: Backend = "faiss") -> float:
    """% of rows i whose cosine nearest target is target i."""
    n = queries.shape[0]
    if n == 0:
        return 0.0
    _, ids = knn_search(l2_normalize(queries), l2_normalize(targets), 1, backend=backend)
    return 100.0 * float(np.mean(ids[:, 0] == np.arange(n)))


def tatoeba_accuracy(xx_emb: np.ndarray, en_emb: np.ndarray, *, backend: Backend = "faiss") -> TatoebaResult:
    """Cosine top-1 accuracy of aligned ``xx_emb[i] <-> en_emb[i]`` in both directions and their mean."""
    if xx_emb.shape[0] != en_emb.shape[0]:
        raise ValueError(f"aligned sets must have equal sizes, got {xx_emb.shape[0]} and {en_emb.shape[0]}")
    fwd = top1_accuracy(xx_emb, en_emb, backend=backend)
    bwd = top1_accuracy(en_emb, xx_emb, backend=backend)
    return TatoebaResult(xx_to_en=fwd, en_to_xx=bwd, mean=(fwd + bwd) / 2)


def _read_lines(path: Path) -> list[str]:
    """Every line of ``path``, blank ones at the end included (they break the alignment)."""
    return [text for _, text in strict_lines(path, keep_blank_tail=True)]


def read_tatoeba_dir(directory: str | Path, langs: Iterable[str] | None = None) -> dict[str, TatoebaPair]:
    """Read LASER's Tatoeba layout: ``tatoeba.{xxx}-eng.{xxx}`` and ``tatoeba.{xxx}-eng.eng`` per language.

    ``langs`` (3-letter codes) restricts and requires the languages; default every language found.
    Both files of a language must have the same number of lines (:class:`CorpusFormatError` otherwise,
    pointing at the first line the shorter file lacks).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ResourceError(f"{directory}: not a directory (expected LASER's tatoeba/v1 folder)")
    if langs is None:
        found = sorted(m.group(1) for p in directory.iterdir() if (m := _FILE.match(p.name)))
        if not found:
            raise ResourceError(f"{directory}: no tatoeba.xxx-eng.xxx files found")
        lang_list = found
    else:
        lang_list = list(langs)
    out: dict[str, TatoebaPair] = {}
    for lang in lang_list:
        xx_path = directory / f"tatoeba.{lang}-eng.{lang}"
        en_path = directory / f"tatoeba.{lang}-eng.eng"
        for p in (xx_path, en_path):
            if not p.is_file():
                raise ResourceError(
                    f"{p}: missing (expected tatoeba.{lang}-eng.{lang} and tatoeba.{lang}-eng.eng)"
                )
        xx, en = _read_lines(xx_path), _read_lines(en_path)
        if len(xx) != len(en):
            shorter, longer = (xx_path, en_path) if len(xx) < len(en) else (en_path, xx_path)
            raise CorpusFormatError(
                shorter,
                min(len(xx), len(en)) + 1,
                f"has {min(len(xx), len(en))} lines but {longer.name} has {max(len(xx), len(en))}",
                hint="the two files must be aligned line by line",
            )
        out[lang] = TatoebaPair(lang, xx, en)
        logger.debug("tatoeba %s: %d pairs", lang, len(xx))
    return out
