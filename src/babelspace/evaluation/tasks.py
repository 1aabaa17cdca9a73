"""Task metadata for ``babelspace eval`` (MTEB-style): what each task measures, on which languages and
split, with which metric, kept apart from the evaluator code in :mod:`babelspace.evaluation.runner`.

Nothing here computes a score; the runner reads these records to name columns, units and defaults.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from babelspace.errors import BabelspaceError

__all__ = [
    "ALL_TASKS",
    "TASKS",
    "TATOEBA_CODES",
    "TaskSpec",
    "parse_tasks",
    "tatoeba_code",
    "two_letter",
]


@dataclass(frozen=True)
class TaskSpec:
    """One evaluation task.

    ``metric`` names the main figure, ``unit`` its unit, ``higher_is_better`` its direction,
    ``average`` how languages are combined (``micro``: pooled counts, ``macro``: mean of languages),
    ``default_data`` what is used with no task-specific data option, ``languages`` the languages of the
    default data (``"bible"``: every non-English language of the offline Bible, paired with English),
    ``split`` the split of the default data, ``column`` the header of the task's column in the table.
    """

    name: str
    description: str
    metric: str
    unit: str
    higher_is_better: bool
    average: str
    column: str
    default_data: str
    languages: str = "bible"
    split: str = "test"
    reference: str = ""


TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        TaskSpec(
            name="xsim",
            description="margin-based similarity-search error, xx -> en (and en -> xx with --direction both)",
            metric="error_rate",
            unit="%",
            higher_is_better=False,
            average="micro",
            column="xsim err%",
            default_data="Bible test books (English pool shared by all languages)",
            reference="LASER source/xsim.py; Artetxe & Schwenk 2019 (arXiv 1811.01136)",
        ),
        TaskSpec(
            name="xsimpp",
            description="xsim with rule-based hard negatives of the English targets in the pool",
            metric="error_rate",
            unit="%",
            higher_is_better=False,
            average="micro",
            column="xsim++ err%",
            default_data="Bible test books + generated hard negatives (or --xsimpp-files)",
            reference="Chen et al. 2023, xSIM++ (arXiv 2306.12907)",
        ),
        TaskSpec(
            name="tatoeba",
            description="cosine top-1 translation retrieval accuracy, both directions and their mean",
            metric="mean_accuracy",
            unit="%",
            higher_is_better=True,
            average="macro",
            column="tatoeba acc%",
            default_data="Bible test books (or LASER's Tatoeba folder with --tatoeba-dir)",
            reference="Artetxe & Schwenk 2019, TACL; LASER data/tatoeba/v1",
        ),
        TaskSpec(
            name="bucc",
            description="parallel-sentence mining F1, threshold tuned on the training split, applied to test",
            metric="f1",
            unit="%",
            higher_is_better=True,
            average="macro",
            column="bucc F1",
            default_data="BUCC-style task: Bible test verses hidden among train-book verses (or --bucc-dir)",
            reference="Zweigenbaum et al. 2018 (BUCC shared task); LASER tasks/bucc",
        ),
        TaskSpec(
            name="sts",
            description="semantic textual similarity: Spearman x 100 of cosine vs gold (0-5)",
            metric="spearman",
            unit="x100",
            higher_is_better=True,
            average="macro",
            column="sts rho",
            default_data="none offline: needs --sts FILE (STS17 or STSb files)",
            languages="from the STS files",
            split="-",
            reference="Cer et al. 2017 (SemEval-2017 Task 1)",
        ),
        TaskSpec(
            name="mse",
            description="MSE between the student's vectors and the teacher's vector of the English side",
            metric="elementwise_mse_x100",
            unit="x100",
            higher_is_better=False,
            average="macro",
            column="mse x100",
            default_data="Bible test books (student: English and translation; teacher: English)",
            reference="Reimers & Gurevych 2020 (arXiv 2004.09813), sentence-transformers MSEEvaluator",
        ),
        TaskSpec(
            name="geometry",
            description="per language: effective rank of the variance spectrum, anisotropy, hubness; "
            "share of the variance that separates languages",
            metric="effective_rank",
            unit="dims",
            higher_is_better=True,
            average="macro",
            column="eff. rank",
            default_data="Bible test books (English pool and each language's verses)",
            reference="Janeiro et al. 2024 (arXiv 2409.12737) section 3; Reimers & Gurevych 2020 Fig. 2",
        ),
        TaskSpec(
            name="bias",
            description="language bias: Spearman on the joined STS sets vs the mean of per-set Spearman",
            metric="drop",
            unit="x100",
            higher_is_better=False,
            average="-",
            column="bias drop",
            default_data="none offline: needs >= 2 --sts files",
            languages="from the STS files",
            split="-",
            reference="Reimers & Gurevych 2020 (arXiv 2004.09813), section 7",
        ),
    )
}

#: Every task, in the order ``--task all`` runs them.
ALL_TASKS: tuple[str, ...] = tuple(TASKS)

_ALIASES = {"xsim++": "xsimpp", "xsim_pp": "xsimpp", "language-bias": "bias", "language_bias": "bias"}


def parse_tasks(value: str | Iterable[str]) -> list[str]:
    """``"xsim,tatoeba"`` / ``"all"`` / a list of names -> canonical task names, in run order.

    Unknown names raise :class:`BabelspaceError` naming them and the valid choices.
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [x.strip().lower() for x in items if x and x.strip()]
    if not names:
        raise BabelspaceError(f"no task given; choose from {', '.join(ALL_TASKS)} or 'all'")
    if "all" in names:
        return list(ALL_TASKS)
    names = [_ALIASES.get(n, n) for n in names]
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        raise BabelspaceError(
            f"unknown task(s) {', '.join(repr(u) for u in unknown)}; choose from {', '.join(ALL_TASKS)} or 'all'"
        )
    wanted = set(names)
    return [t for t in ALL_TASKS if t in wanted]


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


def tatoeba_code(lang: str) -> str:
    """``de`` -> ``deu`` (three-letter codes pass through unchanged)."""
    return TATOEBA_CODES.get(lang, lang)


def two_letter(lang: str) -> str:
    """``deu`` -> ``de`` where known (used to label Tatoeba rows like the other tasks' rows)."""
    return _FROM_TATOEBA.get(lang, lang)
