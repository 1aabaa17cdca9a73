"""Released xsim++ files (Chen et al. 2023): the augmented English file (targets followed by hard
negatives) and its JSON of error types. Scoring is :mod:`babelspace.metrics.xsimpp`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from babelspace.data.lines import strict_lines
from babelspace.errors import CorpusFormatError
from babelspace.metrics.xsimpp import HardNegative


@dataclass
class XsimppFiles:
    """Contents of an augmented English file: the real targets and the hard negatives."""

    targets: list[str]
    negatives: list[HardNegative]


def read_xsimpp_files(augmented: str | Path, types: str | Path) -> XsimppFiles:  # noqa: C901 - one pass over the two files with one branch per malformed-line case
    """Read an augmented English file and its error-type JSON.

    Assumed layout (the runner's ``--augmented FILE --types JSON``): ``augmented`` has one sentence per
    line; ``types`` is a JSON object mapping a 0-based line index of ``augmented`` (as a string) to
    ``{"source": i, "type": name}``, where ``i`` is the 0-based index of the real target the line was
    derived from. Lines that are not keys of the JSON are the real targets, in file order (so target i
    is the i-th such line). Malformed input raises :class:`CorpusFormatError` with the file and line.
    """
    augmented, types = Path(augmented), Path(types)
    lines = [text for _, text in strict_lines(augmented, keep_blank_tail=True)]
    raw = types.read_text(encoding="utf-8")
    try:
        mapping = json.loads(raw)
    except json.JSONDecodeError as e:
        raise CorpusFormatError(types, e.lineno, f"invalid JSON: {e.msg}") from e
    if not isinstance(mapping, dict):
        raise CorpusFormatError(types, 1, "expected a JSON object mapping line index -> {source, type}")

    def key_line(key: str) -> int | None:
        needle = json.dumps(key)
        pos = raw.find(needle)
        return raw.count("\n", 0, pos) + 1 if pos >= 0 else None

    neg_lines: dict[int, tuple[int, str]] = {}
    for key, value in mapping.items():
        where = key_line(key)
        try:
            idx = int(key)
        except ValueError:
            raise CorpusFormatError(types, where, f"key {key!r} is not a line index") from None
        if not 0 <= idx < len(lines):
            raise CorpusFormatError(
                types,
                where,
                f"line index {idx} outside {augmented} ({len(lines)} lines)",
                hint="indices are 0-based",
            )
        if not isinstance(value, dict) or "source" not in value or "type" not in value:
            raise CorpusFormatError(types, where, f"entry {key!r} must be an object with 'source' and 'type'")
        if not isinstance(value["source"], int) or not isinstance(value["type"], str):
            raise CorpusFormatError(
                types, where, f"entry {key!r}: 'source' must be an int and 'type' a string"
            )
        neg_lines[idx] = (value["source"], value["type"])

    targets = [line for i, line in enumerate(lines) if i not in neg_lines]
    for i, line in enumerate(lines):
        if i not in neg_lines and not line.strip():
            raise CorpusFormatError(augmented, i + 1, "empty sentence")
    negatives = []
    for idx in sorted(neg_lines):
        source, neg_type = neg_lines[idx]
        if not 0 <= source < len(targets):
            raise CorpusFormatError(
                types, key_line(str(idx)), f"source {source} outside the {len(targets)} real targets"
            )
        negatives.append(HardNegative(lines[idx], source, neg_type))
    return XsimppFiles(targets, negatives)
