"""``babelspace mine`` output as training pairs: the mine → train loop (as in LASER's CCMatrix).

``babelspace mine --out PAIRS.tsv`` writes ``score<TAB>src<TAB>tgt`` lines, or
``score<TAB>src_id<TAB>tgt_id<TAB>src<TAB>tgt`` when either input had ids, and ``PAIRS.summary.json``
next to it, whose ``src_lang``/``tgt_lang`` say which languages were mined. :func:`read_mined` reads
either layout as it is (no header line) and takes the languages from that summary unless they are
given; a given language that contradicts the summary is an error. ``min_score`` keeps only pairs
whose margin score is at least that (counted as ``"below --min-score"`` otherwise).

Bad lines follow the readers' contract (:mod:`babelspace.data.lines`): ``path:line: reason``, or
skipped and counted with ``skip_bad_lines``. Reasons: ``"wrong column count"`` (another layout than
the first line's), ``"bad score"`` (the first column is not a finite number), ``"empty side"``,
``"invalid utf-8"``.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from babelspace.data.languages import validate_lang
from babelspace.data.lines import BadLines, first_line, require_file, rows
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.errors import CorpusFormatError

__all__ = ["MINED_WIDTHS", "is_mined_file", "mined_summary_path", "read_mined"]

logger = logging.getLogger(__name__)

#: Column counts of ``babelspace mine`` output: score, src, tgt; or score, src_id, tgt_id, src, tgt.
MINED_WIDTHS = (3, 5)
BELOW_MIN_SCORE = "below --min-score"
_COLUMNS = "babelspace mine output is score, src, tgt (or score, src_id, tgt_id, src, tgt) separated by tabs"


def mined_summary_path(path: str | Path) -> Path:
    """``PAIRS.tsv`` -> ``PAIRS.summary.json``, where ``babelspace mine`` writes its summary."""
    path = Path(path)
    return path.with_name(path.stem + ".summary.json")


def is_mined_file(path: str | Path) -> bool:
    """True when the file is laid out as ``babelspace mine`` output: its first non-blank line has 3 or
    5 tab-separated columns (a parallel TSV has 2 or 4), and either the first is a number or the
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
    """Read ``babelspace mine`` output (either layout) as a parallel corpus.

    Languages: the arguments, else the summary's ``src_lang``/``tgt_lang``; the source defaults to
    ``"en"`` as for every 2-column corpus, the target must be known. ``min_score``: drop pairs scoring
    below it.
    """
    path = Path(path)
    require_file(path)
    sl, tl = mined_langs(path, src_lang, tgt_lang)
    report = ReadReport(str(path))
    bad = BadLines(report, skip_bad_lines)
    pairs: list[ParallelPair] = []
    for lineno, cols in rows(path, bad, MINED_WIDTHS, hint=_COLUMNS):
        score = _score(cols[0])
        if score is None:
            bad(path, lineno, "bad score", f"({cols[0]!r} is not a finite number)", hint=_COLUMNS)
            continue
        src, tgt = normalize_whitespace(cols[-2]), normalize_whitespace(cols[-1])
        if not src or not tgt:
            bad(path, lineno, "empty side", "(source)" if not src else "(target)")
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
