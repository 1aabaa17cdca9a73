"""Hub dataset ids in ``--data``: ``owner/name``, ``owner/name:subset``, either with ``@revision``, and
``hf:`` before any of them; loaded through ``datasets.load_dataset`` (memory-mapped from its cache)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from babelspace.errors import ResourceError, first_error_line

__all__ = ["HUB_ID", "is_hub_id", "load_hub"]

#: ``[hf:]owner/name[:subset][@revision]``; group 1 is the dataset id, group 2 the subset (config
#: name), group 3 the revision (a branch, tag or commit).
HUB_ID = re.compile(r"(?:hf:)?([\w.-]+/[\w.-]+)(?::([\w.-]+))?(?:@([\w./-]+))?")
_FILE_SUFFIXES = frozenset("txt tsv csv json jsonl gz bz2 xz zst arrow parquet".split())


def is_hub_id(spec: str) -> bool:
    """A Hub dataset id that is no local path (a name that ends like a file, ``data/x.tsv``, is a
    missing file, not a dataset, unless written ``hf:...``)."""
    match = HUB_ID.fullmatch(spec)
    if match is None or Path(spec).exists():
        return False
    return spec.startswith("hf:") or Path(match.group(1)).suffix[1:].lower() not in _FILE_SUFFIXES


def load_hub(spec: str, split: str) -> Any:
    """A Hub dataset's split (memory-mapped from the datasets cache); offline and not cached: one line."""
    import datasets

    match = HUB_ID.fullmatch(spec)
    if match is None:
        raise ResourceError(f"{spec!r} is not a Hub dataset id (owner/name[:subset][@revision])")
    name, subset, revision = match.groups()
    try:
        return datasets.load_dataset(name, subset, split=split, revision=revision)
    except Exception as exc:  # datasets raises several types for "not there"
        if datasets.config.HF_HUB_OFFLINE:
            raise ResourceError(
                f"--data {spec!r}: Hub dataset {name!r} is not in the local datasets cache and "
                "HF_HUB_OFFLINE=1 forbids downloading it (unset HF_HUB_OFFLINE, or give a local file or folder)"
            ) from None
        first = first_error_line(exc)
        raise ResourceError(f"--data {spec!r}: cannot load Hub dataset {name!r}: {first}") from None
