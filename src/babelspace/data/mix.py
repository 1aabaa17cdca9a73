"""The ``--data`` mix: ``name[:weight]`` specs, and the source and group of each pair for a balanced sampler."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from babelspace.data.hub import is_hub_id
from babelspace.data.pairs import ParallelPair
from babelspace.data.sources import SOURCES
from babelspace.errors import BabelspaceError

logger = logging.getLogger(__name__)


class DataMixError(BabelspaceError):
    """A ``--data`` mix specification (``bible:1,cldr:0.5``) is malformed."""


def parse_data_mix(spec: str | Sequence[str]) -> list[tuple[str, float]]:
    """``"bible:1,cldr:0.5,mono-en:wordnet:0.5"`` -> ``[("bible", 1.0), ("cldr", 0.5), ...]``.

    Items are separated by commas (or given as a list); each is ``NAME`` (weight 1) or
    ``NAME:WEIGHT``. A name is ``bible``, one of `SOURCES`, or an existing corpus path (a TSV file
    or a dataset folder; two aligned files go in a ``--data`` value of their own). Weights are
    finite and > 0; a source may appear once. Raises `DataMixError` naming the bad item.
    """
    items = [spec] if isinstance(spec, str) else list(spec)
    parts = [p.strip() for item in items for p in item.split(",")]
    if not parts or any(not p for p in parts):
        raise DataMixError(f"empty item in data mix {spec!r}: write e.g. 'bible:1,cldr:0.5'")
    out: list[tuple[str, float]] = []
    for part in parts:
        name, weight = _split_weight(part)
        if name != "bible" and name not in SOURCES and not Path(name).exists() and not is_hub_id(name):
            raise DataMixError(
                f"data mix item {part!r}: unknown source {name!r}; use 'bible', one of "
                f"{', '.join(sorted(SOURCES))}, an existing corpus file/folder or a Hub dataset id"
            )
        if name in (n for n, _ in out):
            raise DataMixError(f"data mix item {part!r}: {name!r} is listed twice")
        out.append((name, weight))
    return out


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


def group_weights_for(
    pairs: Iterable[ParallelPair], mix: Sequence[tuple[str, float]] | Mapping[str, float]
) -> dict[tuple[str, str, str], float]:
    """Per-group weights for `BalancedBatchSampler`: a source's weight is its share of a batch, split
    equally among its language pairs (``bible:1`` over 21 pairs gives each 1/21). Sources not in
    ``mix`` weigh 1."""
    weights = dict(mix)
    groups: dict[str, set[tuple[str, str, str]]] = {}
    for p in pairs:
        key = group_key_for(p)
        groups.setdefault(key[0], set()).add(key)
    return {key: weights.get(src, 1.0) / len(keys) for src, keys in groups.items() for key in keys}
