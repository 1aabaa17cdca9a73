"""``babelspace mine`` output as training pairs: the mine → train loop (as in LASER's CCMatrix).

``babelspace mine --out PAIRS.tsv`` writes ``score<TAB>src<TAB>tgt`` lines, or
``score<TAB>src_id<TAB>tgt_id<TAB>src<TAB>tgt`` when either input had ids, and ``PAIRS.summary.json``
next to it, whose ``src_lang``/``tgt_lang`` say which languages were mined (``babelspace align``
writes the 5-column layout too). ``babelspace score`` writes
``score<TAB>src_id<TAB>tgt_id<TAB>src<TAB>tgt<TAB>src_lang<TAB>tgt_lang``: each row carries its own
languages (a bitext may mix language pairs). :func:`read_mined` reads any of the three layouts as it
is (no header line): the 7-column layout's languages from its columns (as a 4-column TSV's), the
others' from the summary unless they are given; a given language that contradicts the summary is an
error.

The file trains as it is: the ``threshold`` of its summary (the cut the command that wrote it chose)
applies, so rows below it (an edited file) are counted as ``"below the summary's threshold"``;
``min_score`` is an extra cut a user chooses, keeping only pairs whose margin score is at least that
(counted as ``"below --min-score"`` otherwise). Scores are written to six decimals, so a row within
:data:`SCORE_ROUNDING` below the threshold is at it.

Bad lines follow the readers' contract (:mod:`babelspace.data.lines`): ``path:line: reason``, or
skipped and counted with ``skip_bad_lines``. Reasons: ``"wrong column count"`` (another layout than
the first line's), ``"bad score"`` (the first column is not a finite number), ``"empty side"``,
``"invalid utf-8"``, ``"unknown language code"`` (7-column layout).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from babelspace.data.languages import is_valid_lang, validate_lang
from babelspace.data.lines import BadLines, first_line, require_file, rows
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.errors import CorpusFormatError

__all__ = ["MINED_WIDTHS", "is_mined_file", "mined_summary_path", "read_mined", "summary_threshold"]

logger = logging.getLogger(__name__)

#: Column counts of ``babelspace mine``/``align``/``score`` output: score, src, tgt; or score, src_id,
#: tgt_id, src, tgt; or score, src_id, tgt_id, src, tgt, src_lang, tgt_lang.
MINED_WIDTHS = (3, 5, 7)
#: The width whose rows carry their languages.
WITH_LANGS = 7
BELOW_MIN_SCORE = "below --min-score"
BELOW_SUMMARY = "below the summary's threshold"
#: Scores are written to six decimals: a row this close below the summary's threshold is at it.
SCORE_ROUNDING = 1e-6
_COLUMNS = (
    "babelspace mine output is score, src, tgt (or score, src_id, tgt_id, src, tgt[, src_lang, tgt_lang]) "
    "separated by tabs"
)


def mined_summary_path(path: str | Path) -> Path:
    """``PAIRS.tsv`` -> ``PAIRS.summary.json``, where ``babelspace mine`` writes its summary."""
    path = Path(path)
    return path.with_name(path.stem + ".summary.json")


def is_mined_file(path: str | Path) -> bool:
    """True when the file is laid out as ``babelspace mine`` output: its first non-blank line has 3, 5
    or 7 tab-separated columns (a parallel TSV has 2 or 4), and either the first is a number or the
    mining summary is next to it."""
    path = Path(path)
    raw = first_line(path)
    if raw is None:
        return False
    fields = raw.split(b"\t")
    if len(fields) not in MINED_WIDTHS:
        return False
    return _score(fields[0].decode("utf-8", "replace")) is not None or mined_summary_path(path).is_file()


def read_mined(
    path: str | Path,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    min_score: float | None = None,
    skip_bad_lines: bool = False,
) -> ParallelCorpus:
    """Read ``babelspace mine``, ``align`` or ``score`` output (any layout) as a parallel corpus.

    Languages: the 7-column layout's own columns; else the arguments, else the summary's
    ``src_lang``/``tgt_lang``; the source defaults to ``"en"`` as for every 2-column corpus, the
    target must be known. Rows below the summary's ``threshold`` are dropped (an edited file);
    ``min_score``: drop pairs scoring below it too.
    """
    path = Path(path)
    require_file(path)
    raw = first_line(path)
    with_langs = raw is not None and len(raw.split(b"\t")) == WITH_LANGS
    sl, tl = ("en", "") if with_langs else mined_langs(path, src_lang, tgt_lang)
    floor = summary_threshold(path)
    report = ReadReport(str(path))
    bad = BadLines(report, skip_bad_lines)
    pairs: list[ParallelPair] = []
    for lineno, cols in rows(path, bad, MINED_WIDTHS, hint=_COLUMNS):
        score = _score(cols[0])
        if score is None:
            bad(path, lineno, "bad score", f"({cols[0]!r} is not a finite number)", hint=_COLUMNS)
            continue
        text = cols[3:5] if len(cols) == WITH_LANGS else cols[-2:]
        src, tgt = normalize_whitespace(text[0]), normalize_whitespace(text[1])
        if not src or not tgt:
            bad(path, lineno, "empty side", "(source)" if not src else "(target)")
            continue
        if len(cols) == WITH_LANGS:
            codes = [c.strip() for c in cols[5:7]]
            unknown = [c for c in codes if not is_valid_lang(c)]
            if unknown:
                bad(path, lineno, "unknown language code", repr(unknown[0]))
                continue
            sl, tl = (validate_lang(c) for c in codes)
        if floor is not None and score < floor - SCORE_ROUNDING:
            report.skipped[BELOW_SUMMARY] = report.skipped.get(BELOW_SUMMARY, 0) + 1
            continue
        if min_score is not None and score < min_score:
            report.skipped[BELOW_MIN_SCORE] = report.skipped.get(BELOW_MIN_SCORE, 0) + 1
            continue
        pairs.append(ParallelPair(src, tgt, sl, tl, f"{path}:{lineno}"))
    report.kept = len(pairs)
    logger.info(report.summary())
    return ParallelCorpus(path.name, pairs, report)


def _score(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def mined_langs(path: Path, src_lang: str | None, tgt_lang: str | None) -> tuple[str, str]:
    """(src_lang, tgt_lang) of a mined file: the arguments, else its summary's; see :func:`read_mined`."""
    summary_file = mined_summary_path(path)
    summary = _read_summary(summary_file)
    langs = []
    for side, given in (("src", src_lang), ("tgt", tgt_lang)):
        found = summary.get(f"{side}_lang")
        found = validate_lang(found, summary_file) if found else None
        given = validate_lang(given) if given else None
        if given and found and given != found:
            raise CorpusFormatError(
                path,
                None,
                f"--{side}-lang {given} contradicts the mining summary {summary_file} ({side}_lang {found})",
                hint=f"drop --{side}-lang, or check that this is the right file",
            )
        langs.append(given or found)
    if langs[1] is None:
        raise CorpusFormatError(
            path,
            None,
            "mined pairs without a target language",
            hint=f"{summary_file} names none: pass --tgt-lang (and --src-lang if the source is not English), "
            "or mine with --src-lang and --tgt-lang",
        )
    return langs[0] or "en", langs[1]


def summary_threshold(path: str | Path) -> float | None:
    """The ``threshold`` the summary next to a mined file records (None: none, or not a number)."""
    value = _read_summary(mined_summary_path(path)).get("threshold")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _read_summary(summary_file: Path) -> dict[str, Any]:
    """The mining summary next to a mined file ({} when there is none)."""
    if not summary_file.is_file():
        return {}
    try:
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusFormatError(summary_file, None, f"not a babelspace mine summary ({exc})") from None
    if not isinstance(summary, dict):
        raise CorpusFormatError(summary_file, None, "not a babelspace mine summary (not a JSON object)")
    return summary
