"""Monolingual input files for mining: one sentence per line, or ``id<TAB>sentence``.

Lines are whitespace-normalised (:func:`babelspace.data.pairs.normalize_whitespace`) and exact
duplicates dropped (the first occurrence keeps its id). Empty and over-long lines are skipped and
counted; a line that is not UTF-8 (or, in id mode, has no ``id<TAB>sentence`` shape) raises
:class:`~babelspace.errors.CorpusFormatError` with ``file:line``, or is skipped and counted with
``skip_bad_lines=True``.

The fingerprint (sha256 of the normalised, deduplicated sentence list) identifies the input in the
shard manifest, so a resumed run can tell that the shards on disk belong to the same sentences.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from babelspace.data.lines import INVALID_UTF8, decode_line, split_lines
from babelspace.data.pairs import normalize_whitespace
from babelspace.errors import CorpusFormatError, ResourceError

__all__ = ["DEFAULT_MAX_CHARS", "ReadStats", "SentenceFile", "fingerprint", "read_sentences"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_CHARS = 1000


@dataclass
class ReadStats:
    """What happened to the lines of one input file."""

    lines: int = 0
    kept: int = 0
    empty: int = 0
    too_long: int = 0
    duplicates: int = 0
    invalid_utf8: int = 0
    bad_format: int = 0

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)

    def summary(self) -> str:
        skipped = {k: v for k, v in self.to_dict().items() if k not in ("lines", "kept") and v}
        rest = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in skipped.items())
        return f"{self.kept}/{self.lines} lines kept" + (f" (skipped: {rest})" if rest else "")


@dataclass
class SentenceFile:
    """Deduplicated, normalised sentences of one file, their ids and line numbers (1-based)."""

    path: str
    texts: list[str]
    ids: list[str] | None
    lines: list[int]
    stats: ReadStats = field(default_factory=ReadStats)
    ids_detected: bool = False  # ids were not asked for (--ids) but detected (every line has one tab)

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def has_ids(self) -> bool:
        return self.ids is not None

    def id_of(self, i: int) -> str:
        """The sentence's id, or its line number when the file has no ids."""
        return self.ids[i] if self.ids is not None else str(self.lines[i])

    @cached_property
    def fingerprint(self) -> str:
        return fingerprint(self.texts)


def fingerprint(texts: list[str]) -> str:
    """sha256 over the sentences (each UTF-8 encoded and newline-terminated)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def _decode(path: Path, raw: list[bytes], stats: ReadStats, skip_bad_lines: bool) -> list[tuple[int, str]]:
    """``(line_no, text)`` of the lines that are UTF-8; a bad one raises ``path:line`` or is counted."""
    decoded: list[tuple[int, str]] = []
    for lineno, b in enumerate(raw, 1):
        text, detail = decode_line(b)
        if text is not None:
            decoded.append((lineno, text))
        elif not skip_bad_lines:
            raise CorpusFormatError(
                path,
                lineno,
                f"{INVALID_UTF8} {detail}",
                hint="convert the file to UTF-8, or pass --skip-bad-lines to skip such lines",
            )
        else:
            stats.invalid_utf8 += 1
    return decoded


#: Auto-detected ids are refused when more than this share of them has three or more words.
SENTENCE_LIKE_IDS = 0.5


def _every_line_has_an_id(path: Path, decoded: list[tuple[int, str]]) -> bool:
    """Id mode: every non-empty line has exactly one tab (and there is one).

    Raises :class:`CorpusFormatError` when the first column reads as sentences (most of its values
    have three or more words): such a file is a two-column bitext, not ``id<TAB>sentence``.
    """
    non_empty = [s for _, s in decoded if s.strip()]
    ids = bool(non_empty) and all(s.count("\t") == 1 for s in non_empty)
    if not ids:
        return False
    first = [s.split("\t", 1)[0] for s in non_empty]
    wordy = [f for f in first if len(f.split()) >= 3]
    if len(wordy) > SENTENCE_LIKE_IDS * len(first):
        raise CorpusFormatError(
            path,
            None,
            f"every line has one tab, but the first column looks like sentences, not ids ({len(wordy)} of "
            f"{len(first)} have three or more words, e.g. {wordy[0][:60]!r}): is this a two-column bitext?",
            hint="pass one sentence per line (for a bitext use 'babelspace score'), --no-ids to read each "
            "whole line as the sentence, or --ids to read the first column as ids all the same",
        )
    logger.info("%s: every line is 'id<TAB>sentence'; reading ids (pass --no-ids to read whole lines)", path)
    return True


def read_sentences(
    path: str | Path,
    *,
    ids: bool | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    skip_bad_lines: bool = False,
) -> SentenceFile:
    """Read one sentence per line (``ids=False``), ``id<TAB>sentence`` lines (``ids=True``), or
    detect (``ids=None``: id mode when every non-empty line has exactly one tab, refused when the
    first column reads as sentences; ``SentenceFile.ids_detected`` then says ids were detected).

    Raises:
        ResourceError: the file is missing or not a file.
        CorpusFormatError: the file has no usable sentence, or a bad line (without ``skip_bad_lines``).
    """
    path = Path(path)
    if not path.exists():
        raise ResourceError(f"input file not found: {path}")
    if not path.is_file():
        raise ResourceError(f"input is not a file: {path}")
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    stats = ReadStats()
    raw = split_lines(path, keep_blank_tail=True)  # a blank last line is an empty line, counted
    stats.lines = len(raw)
    if not raw:
        raise CorpusFormatError(path, None, "the file is empty", hint="expected one sentence per line")

    decoded = _decode(path, raw, stats, skip_bad_lines)
    detected = ids is None and _every_line_has_an_id(path, decoded)
    ids = detected if ids is None else ids
    kept = _keep_sentences(path, decoded, stats, ids=ids, max_chars=max_chars, skip_bad_lines=skip_bad_lines)
    kept.ids_detected = detected
    stats.kept = len(kept.texts)
    if not kept.texts:
        raise CorpusFormatError(path, None, f"no usable sentence ({stats.summary()})")
    logger.info("%s: %s", path, stats.summary())
    return kept


def _keep_sentences(
    path: Path,
    decoded: list[tuple[int, str]],
    stats: ReadStats,
    *,
    ids: bool,
    max_chars: int,
    skip_bad_lines: bool,
) -> SentenceFile:
    """The normalised, deduplicated sentences of ``decoded``; empty, over-long, duplicate and (id mode)
    malformed lines are counted in ``stats`` (a malformed one raises ``path:line`` unless skipped)."""
    texts: list[str] = []
    out_ids: list[str] | None = [] if ids else None
    lines: list[int] = []
    seen: set[str] = set()
    for lineno, line in decoded:
        sid, s = _split_id(path, lineno, line, stats, skip_bad_lines) if ids else (None, line)
        if s is None:
            continue
        text = normalize_whitespace(s)
        if not text:
            stats.empty += 1
        elif len(text) > max_chars:
            stats.too_long += 1
        elif text in seen:
            stats.duplicates += 1
        else:
            seen.add(text)
            texts.append(text)
            lines.append(lineno)
            if out_ids is not None:
                out_ids.append(sid or "")
    return SentenceFile(str(path), texts, out_ids, lines, stats)


def _split_id(
    path: Path, lineno: int, line: str, stats: ReadStats, skip_bad_lines: bool
) -> tuple[str | None, str | None]:
    """``(id, sentence)`` of an ``id<TAB>sentence`` line; ``(None, None)`` for a line that is counted
    and skipped (empty, or malformed with ``skip_bad_lines``); a malformed one raises ``path:line``."""
    if not line.strip():
        stats.empty += 1
        return None, None
    parts = line.split("\t")
    if len(parts) == 2 and parts[0].strip():
        return parts[0].strip(), parts[1]
    if not skip_bad_lines:
        raise CorpusFormatError(
            path,
            lineno,
            f"expected 'id<TAB>sentence', found {len(parts) - 1} tab(s)" if len(parts) != 2 else "empty id",
            hint="drop --ids for one sentence per line, or pass --skip-bad-lines",
        )
    stats.bad_format += 1
    return None, None
