"""Content hashes of model folders, so caches follow what a model *is*, not where it lives.

A cache keyed by a path or by file sizes goes stale silently when a model is retrained in place
(same path, same byte sizes, other weights). :func:`model_content_hash` hashes the bytes of every
weight and configuration file of a folder. Hashing a 470 MB model takes seconds, so each file's
digest is memoised by ``(path, size, mtime_ns)`` in-process and in a small JSON file in the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from babelspace.writable import atomic_write_text

logger = logging.getLogger(__name__)

# Files whose bytes define what a sentence-transformers folder computes.
_CONTENT_SUFFIXES = (".safetensors", ".bin", ".pt", ".json", ".txt", ".model")
# Sub-folders that are not the model itself: training checkpoints, exported backends (writing an
# ONNX/OpenVINO export into the folder must not change the hash it is keyed by).
_EXCLUDED_DIRS = {"checkpoints", "onnx", "openvino"}
_MEMO: dict[tuple[str, int, int], str] = {}


def _memo_path() -> Path:
    from babelspace.resources import cache_dir

    return Path(cache_dir()) / "file-hashes.json"


def _load_disk_memo() -> dict[str, str]:
    try:
        return json.loads(_memo_path().read_text())
    except (OSError, ValueError):
        return {}


def _store_disk_memo(memo: dict[str, str]) -> None:
    path = _memo_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(memo))
    except OSError as exc:  # a read-only cache only costs re-hashing next time
        logger.debug("cannot store file-hash memo %s: %s", path, exc)


def file_digest(path: Path, disk_memo: dict[str, str] | None = None) -> str:
    """sha256 of a file's bytes, memoised by (resolved path, size, mtime_ns)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _MEMO:
        return _MEMO[key]
    disk_key = "|".join(map(str, key))
    if disk_memo is not None and disk_key in disk_memo:
        _MEMO[key] = disk_memo[disk_key]
        return _MEMO[key]
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    _MEMO[key] = h.hexdigest()
    if disk_memo is not None:
        disk_memo[disk_key] = _MEMO[key]
    return _MEMO[key]


def model_content_hash(folder: str | Path) -> str:
    """Hash of a model folder's content: relative names and bytes of its weight/config files.

    Raises ``FileNotFoundError`` if ``folder`` is not a directory."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"not a model folder: {root}")
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and p.suffix in _CONTENT_SUFFIXES
        and not _EXCLUDED_DIRS & set(p.relative_to(root).parts)
    )
    disk_memo = _load_disk_memo()
    before = len(disk_memo)
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(root).as_posix().encode())
        h.update(file_digest(f, disk_memo).encode())
    if len(disk_memo) != before:
        _store_disk_memo(disk_memo)
    return h.hexdigest()[:20]
