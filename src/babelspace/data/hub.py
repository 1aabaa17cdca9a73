"""Hub dataset ids in ``--data``: ``owner/name``, ``owner/name:subset`` or ``hf:`` before either."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["HUB_ID", "is_hub_id"]

#: ``[hf:]owner/name[:subset]``; group 1 is the dataset id, group 2 the subset (config name).
HUB_ID = re.compile(r"(?:hf:)?([\w.-]+/[\w.-]+)(?::([\w.-]+))?")
_FILE_SUFFIXES = frozenset("txt tsv csv json jsonl gz bz2 xz zst arrow parquet".split())


def is_hub_id(spec: str) -> bool:
    """A Hub dataset id that is no local path (a name that ends like a file, ``data/x.tsv``, is a
    missing file, not a dataset, unless written ``hf:...``)."""
    match = HUB_ID.fullmatch(spec)
    if match is None or Path(spec).exists():
        return False
    return spec.startswith("hf:") or Path(match.group(1)).suffix[1:].lower() not in _FILE_SUFFIXES
