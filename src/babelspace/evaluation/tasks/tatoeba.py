"""Tatoeba task: cosine top-1 translation retrieval accuracy, both directions and their mean.

Data: the default evaluation pairs, or LASER's Tatoeba folder (``tatoeba_dir``, files
``tatoeba.xxx-eng.{xxx,eng}``). Protocol: Artetxe & Schwenk 2019, TACL; LASER ``data/tatoeba/v1``.
Languages are macro-averaged.
"""

from __future__ import annotations

import logging

import numpy as np

from babelspace.evaluation.data import LangPairs, subsample_indices, subset_description
from babelspace.evaluation.formats.tatoeba import read_tatoeba_dir
from babelspace.evaluation.results import TaskResult
from babelspace.evaluation.tasks.spec import TaskContext, TaskSpec
from babelspace.metrics.tatoeba import tatoeba_accuracy

logger = logging.getLogger(__name__)

#: ISO 639-1 -> the three-letter codes of LASER's Tatoeba files (``tatoeba.deu-eng.deu``), for the
#: languages of the offline Bible and a few more.
TATOEBA_CODES: dict[str, str] = {
    "ar": "ara",
    "bn": "ben",
    "de": "deu",
    "es": "spa",
    "fa": "pes",
    "fr": "fra",
    "hi": "hin",
    "id": "ind",
    "it": "ita",
    "ja": "jpn",
    "ko": "kor",
    "nl": "nld",
    "pl": "pol",
    "pt": "por",
    "ro": "ron",
    "ru": "rus",
    "sw": "swh",
    "tl": "tgl",
    "tr": "tur",
    "uk": "ukr",
    "vi": "vie",
    "zh": "cmn",
    "cs": "ces",
    "sv": "swe",
    "fi": "fin",
    "el": "ell",
    "he": "heb",
}
_FROM_TATOEBA = {v: k for k, v in TATOEBA_CODES.items()}

ACCURACY_KEYS = ("mean_accuracy", "xx2en_accuracy", "en2xx_accuracy")


def tatoeba_code(lang: str) -> str:
    """``de`` -> ``deu`` (three-letter codes pass through unchanged)."""
    return TATOEBA_CODES.get(lang, lang)


def two_letter(lang: str) -> str:
    """``deu`` -> ``de`` where known (used to label Tatoeba rows like the other tasks' rows)."""
    return _FROM_TATOEBA.get(lang, lang)


def _groups(ctx: TaskContext) -> tuple[dict[str, LangPairs], str]:
    cfg = ctx.cfg
    if not cfg.tatoeba_dir:
        return ctx.data.groups, ctx.data.description
    langs = [tatoeba_code(lang) for lang in cfg.langs] if cfg.langs else None
    groups: dict[str, LangPairs] = {}
    for code, p in read_tatoeba_dir(cfg.tatoeba_dir, langs).items():
        label = two_letter(code)
        groups[label] = LangPairs(label, p.en, p.xx).subset(
            subsample_indices(len(p.en), cfg.max_sentences, cfg.seed)
        )
    desc = subset_description(f"LASER Tatoeba folder {cfg.tatoeba_dir}", cfg.max_sentences, cfg.seed)
    return groups, desc


def run(ctx: TaskContext) -> TaskResult:
    groups, desc = _groups(ctx)
    res = TaskResult("tatoeba", config={"model": ctx.cfg.model, "similarity": "cosine top-1", "data": desc})
    ctx.encode_groups(list(groups.values()))
    for lang, g in groups.items():
        r = tatoeba_accuracy(ctx.cache.encode(g.xx), ctx.cache.encode(g.en))
        res.per_language[lang] = {
            "mean_accuracy": r.mean,
            "xx2en_accuracy": r.xx_to_en,
            "en2xx_accuracy": r.en_to_xx,
            "n": len(g),
        }
        logger.info("tatoeba %s: %.2f%% (xx->en %.2f, en->xx %.2f)", lang, r.mean, r.xx_to_en, r.en_to_xx)
    rows = list(res.per_language.values())
    res.average = {key: float(np.mean([r[key] for r in rows])) for key in ACCURACY_KEYS} | {
        "average": "macro"
    }
    res.n_sentences = sum(len(g) for g in groups.values())
    return res


SPEC = TaskSpec(
    name="tatoeba",
    description="cosine top-1 translation retrieval accuracy, both directions and their mean",
    metric="mean_accuracy",
    unit="%",
    higher_is_better=True,
    column="tatoeba acc%",
    run=run,
)
