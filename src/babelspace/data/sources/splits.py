"""Deterministic, disjoint train/dev/test splits of a source by a hash of each text."""

from __future__ import annotations

import hashlib
import logging

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")


def split_of_text(text: str) -> str:
    """``"test"``, ``"dev"`` or ``"train"`` for an English text: a pure function of the text.

    1 in 20 texts (by sha1) is test, 1 in 20 dev, the rest train; the same text always lands in the
    same split, on every machine and Python version, so held-out text is never trained on.
    """
    bucket = int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:4], "big") % 20
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {SPLITS}")
