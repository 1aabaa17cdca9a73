"""The ``--data`` mix: the one parser of ``--data`` values (``name[:weight]`` items, line-aligned
pairs ``aligned:SRC_FILE+TGT_FILE``), and the source and group of each pair for a balanced sampler."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from babelspace.data.hub import is_hub_id
from babelspace.data.pairs import ParallelPair
from babelspace.data.sources import SOURCES
from babelspace.errors import BabelspaceError, CorpusFormatError

logger = logging.getLogger(__name__)


#: The prefix of a line-aligned file pair: ``aligned:SRC_FILE+TGT_FILE``.
ALIGNED = "aligned:"
_PLAIN = "a plain-text file (no tab on its first line: one sentence per line), not a corpus"


class DataMixError(BabelspaceError):
    """A ``--data`` mix specification (``bible:1,cldr:0.5``) is malformed."""


class UnknownCorpus(DataMixError):
    """A ``--data`` item names no source, existing path or Hub dataset id."""


class PlainTextCorpus(DataMixError, CorpusFormatError):
    """A ``--data`` item is a one-sentence-per-line file, half of a line-aligned pair (``path: reason``)."""


@dataclass(frozen=True)
class DataItem:
    """One corpus of a ``--data`` value: its name as written without the weight (``bible``, ``cldr``,
    ``p.tsv``, ``aligned:a.de+a.en``, ``owner/name``), its sampling weight and, for a line-aligned
    pair, its two files."""

    name: str
    weight: float = 1.0
    aligned: tuple[Path, Path] | None = None

    def paths(self) -> list[Path]:
        """The local files and folders the corpus reads."""
        if self.aligned is not None:
            return list(self.aligned)
        return [Path(self.name)] if Path(self.name).exists() else []


def parse_data_items(spec: str | Sequence[str], *, weights: bool = True) -> list[DataItem]:
    """The corpora of ``--data`` values: the one parser of ``--data`` (training, evaluation, ``score``).

    Items are separated by commas (or given as a list); each is ``NAME`` (weight 1) or
    ``NAME:WEIGHT``. A name is ``bible``, one of `SOURCES`, an existing corpus path (a TSV, JSON
    Lines/JSON, CSV or Parquet file, ``babelspace mine`` output, a dataset folder or a folder of data
    files), a Hub dataset id, or ``aligned:SRC_FILE+TGT_FILE``: two line-aligned one-sentence-per-line
    files (`aligned_files`). A value that as a whole names an existing path or an aligned pair is one
    item, commas and all. Weights are finite and > 0 (``weights=False``: none allowed); a corpus may
    appear once. A plain-text file named on its own, or two of them joined by a comma (the form that
    once meant an aligned pair), is an error that says how to write the pair. Raises `DataMixError`
    naming the bad item.
    """
    values = [spec] if isinstance(spec, str) else list(spec)
    out: list[DataItem] = []
    for value in values:
        for part in _parts(value):
            item = _item(part, weights)
            if item.name in (i.name for i in out):
                raise DataMixError(f"data mix item {part!r}: {item.name!r} is listed twice")
            out.append(item)
    if not out:
        raise DataMixError(f"empty item in data mix {spec!r}: write e.g. 'bible:1,cldr:0.5'")
    return out


def parse_data_mix(spec: str | Sequence[str]) -> list[tuple[str, float]]:
    """``"bible:1,cldr:0.5,mono-en:wordnet:0.5"`` -> ``[("bible", 1.0), ("cldr", 0.5), ...]``: the
    (name, weight) of each item of `parse_data_items`."""
    return [(item.name, item.weight) for item in parse_data_items(spec)]


def parse_corpus(spec: str) -> DataItem:
    """The one corpus ``spec`` names (as `parse_data_items` reads it, without a weight)."""
    items = parse_data_items([spec], weights=False)
    if len(items) != 1:
        raise DataMixError(f"{spec!r} names {len(items)} corpora; give one here")
    return items[0]


def mix_weights(spec: str | Sequence[str] | None) -> list[float]:
    """The sampling weight of each item of ``--data`` values, read by this module's parser but without
    checking that the corpora exist (a checkpoint's saved value may name a path relative to another
    folder); an item whose weight does not parse counts as weight 1."""
    values = [spec] if isinstance(spec, str) else list(spec or [])
    out = []
    for value in values:
        for part in _split(str(value)):
            try:
                out.append(_split_weight(part)[1])
            except DataMixError:
                out.append(1.0)
    return out


def local_paths(values: Iterable[str] | None) -> list[Path]:
    """The existing local files and folders ``--data`` values name, as the parser splits them; an
    item that does not parse still gives what of it exists (``name`` or ``name`` without ``:weight``)."""
    found: list[Path] = []
    for value in values or ():
        for part in _split(str(value)):
            try:
                found += _item(part, True).paths()
                continue
            except DataMixError:
                pass
            name = next((n for n in (part, part.rpartition(":")[0]) if n and Path(n).exists()), None)
            found += [Path(name)] if name else []
    return found


def aligned_files(spec: str) -> tuple[Path, Path]:
    """The two files of ``aligned:SRC_FILE+TGT_FILE``: the split at a ``+`` that leaves two existing
    files on either side (paths may hold ``+``, ``:`` or ``,``; two such splits are an error)."""
    body = spec.removeprefix(ALIGNED)
    cuts = [i for i, c in enumerate(body) if c == "+"]
    pairs = [(Path(body[:i]), Path(body[i + 1 :])) for i in cuts]
    found = [(a, b) for a, b in pairs if a.is_file() and b.is_file()]
    if len(found) == 1:
        return found[0]
    if found:
        ways = "; ".join(f"{a} + {b}" for a, b in found)
        raise DataMixError(
            f"{spec!r}: it splits at a '+' into two existing files in {len(found)} ways ({ways})"
        )
    if len(pairs) == 1:
        missing = next(p for p in pairs[0] if not p.is_file())
        why = "is not a file" if missing.exists() else "does not exist"
        raise DataMixError(
            f"{spec!r}: {missing} {why} (two line-aligned files go as 'aligned:SRC_FILE+TGT_FILE')"
        )
    raise DataMixError(
        f"{spec!r}: no '+' in it splits it into two existing files (write 'aligned:SRC_FILE+TGT_FILE')"
    )


def _split(value: str) -> list[str]:
    """The items of one value: the whole value when it names one existing corpus, else its commas' parts."""
    value = value.strip()
    if "," in value and (Path(value).exists() or _aligned_whole(value)):
        return [value]
    return [p.strip() for p in value.split(",")]


def _aligned_whole(value: str) -> bool:
    if not value.startswith(ALIGNED):
        return False
    try:
        _aligned_weight(value)
    except DataMixError:
        return False
    return True


def _parts(value: str) -> list[str]:
    """`_split`, refusing empty items and plain-text files joined by a comma."""
    parts = _split(value)
    if any(not p for p in parts):
        raise DataMixError(f"empty item in data mix {value!r}: write e.g. 'bible:1,cldr:0.5'")
    plain = [p for p in parts if _is_plain_text(p)]
    if plain and len(parts) > 1:
        pair = f"aligned:{parts[0]}+{parts[1]}" if len(parts) == 2 else "aligned:SRC_FILE+TGT_FILE"
        raise DataMixError(
            f"{value!r}: a comma separates the corpora of a mix, and {plain[0]} is {_PLAIN}; "
            f"two line-aligned files go as '{pair}'"
        )
    return parts


def _is_plain_text(name: str) -> bool:
    from babelspace.data.formats import corpus_format  # lazily: it loads pyarrow (a CLI parser must not)

    path = Path(name)
    return path.is_file() and corpus_format(path) == "text"


def _item(part: str, weights: bool) -> DataItem:
    """One item: ``NAME[:WEIGHT]`` or ``aligned:SRC_FILE+TGT_FILE[:WEIGHT]``."""
    if part.startswith(ALIGNED):
        name, weight, files = _aligned_weight(part)
    elif Path(part).exists():
        name, weight, files = part, 1.0, None  # a path whose name ends like a weight
    else:
        (name, weight), files = _split_weight(part), None
    if not weights and name != part:
        raise DataMixError(f"{part!r}: a sampling weight means nothing here; name the corpus alone")
    if (
        files is None
        and name != "bible"
        and name not in SOURCES
        and not Path(name).exists()
        and not is_hub_id(name)
    ):
        raise UnknownCorpus(
            f"data mix item {part!r}: unknown source {name!r}; use 'bible', one of "
            f"{', '.join(sorted(SOURCES))}, an existing corpus file/folder, 'aligned:SRC_FILE+TGT_FILE' "
            "or a Hub dataset id"
        )
    if files is None and _is_plain_text(name):
        raise PlainTextCorpus(
            name,
            None,
            "not a TSV file (no tab on its first line): one sentence per line is half of a line-aligned pair",
            hint="two line-aligned files go as 'aligned:SRC_FILE+TGT_FILE'",
        )
    return DataItem(name, weight, files)


def _aligned_weight(part: str) -> tuple[str, float, tuple[Path, Path]]:
    """(name, weight, files) of ``aligned:...[:WEIGHT]``: the whole part when it splits into two files."""
    try:
        return part, 1.0, aligned_files(part)
    except DataMixError as whole:
        head, _, tail = part.rpartition(":")
        try:
            float(tail)
        except ValueError:
            raise whole from None
        if head + ":" == ALIGNED:
            raise whole from None
        name, weight = _split_weight(part)
        return name, weight, aligned_files(name)


def _split_weight(part: str) -> tuple[str, float]:
    name, sep, tail = part.rpartition(":")
    if not sep or not name:
        return part, 1.0
    try:
        weight = float(tail)
    except ValueError:
        if re.match(r"[-+.0-9]", tail):
            raise DataMixError(f"data mix item {part!r}: weight {tail!r} is not a number") from None
        return part, 1.0  # a name with a colon, such as mono-en:wordnet
    if not math.isfinite(weight) or weight <= 0:
        raise DataMixError(f"data mix item {part!r}: weight must be a finite number > 0, got {tail!r}")
    return name, weight


def source_of(pair: ParallelPair) -> str:
    """The source a pair came from, read off its ``origin``: a `SOURCES` name, ``bible``, or the
    corpus path for file and dataset rows (``path:line`` -> ``path``)."""
    origin = pair.origin
    for name in sorted(SOURCES, key=len, reverse=True):
        if origin.startswith(name + ":"):
            return name
    if origin.startswith("bible:"):
        return "bible"
    return origin.rsplit(":", 1)[0] if ":" in origin else origin


def group_key_for(pair: ParallelPair) -> tuple[str, str, str]:
    """``(source, src_lang, tgt_lang)``: the sampler's group, balanced per source and language pair."""
    return (source_of(pair), pair.src_lang, pair.tgt_lang)


def group_weights(names: Sequence[Hashable], mix: Mapping[str, float]) -> dict[Hashable, float]:
    """Per-group weights for `BalancedBatchSampler` from group names ``(source, src_lang, tgt_lang)``
    (`group_key_for`): a source's weight is its share of a batch, split equally among its language
    pairs (``bible:1`` over 21 pairs gives each 1/21). Sources not in ``mix`` weigh 1."""
    per_source: dict[str, int] = {}
    for name in names:
        per_source[name[0]] = per_source.get(name[0], 0) + 1  # type: ignore[index]
    return {name: mix.get(name[0], 1.0) / per_source[name[0]] for name in names}  # type: ignore[index]
