"""The folders of the Arrow corpus cache: keyed by content, checked for space before a conversion,
renamed into place when complete, and validated against their own files every time they are opened.

A converted corpus lives in ``<cache>/corpora/<key>/`` (the files are described in
`babelspace.data.arrow_corpus`). ``meta.json`` is written last and records, for every other file,
its size, modification time, an xxh3 hash of its whole content and one of sampled blocks
(:data:`SAMPLE_BLOCKS` blocks of :data:`SAMPLE_BYTES`, the first and last included), and an xxh3
checksum of its own content. `read_meta` refuses (`CacheDamaged`) a folder whose files are missing,
have other sizes, whose ``meta.json`` is not the one written, or whose content changed: each open
hashes the sampled blocks (cheap whatever the size), and a file whose modification time is not the
recorded one (an edit in place, even one that keeps the size) is hashed whole. `build` then says so
in one line, removes the folder and converts again.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import xxhash

from babelspace.errors import ResourceError
from babelspace.writable import write_error

__all__ = [
    "DATA_FILES",
    "FORMAT_VERSION",
    "CacheDamaged",
    "build",
    "check_cache_dir",
    "content_key",
    "discard",
    "read_meta",
    "write_meta",
]

logger = logging.getLogger(__name__)

#: Bumped whenever the cache layout or the validation changes: old caches are then not reused.
FORMAT_VERSION = 3
#: Blocks of each cache file hashed at every open (evenly spaced, the first and last included).
SAMPLE_BLOCKS = 16
SAMPLE_BYTES = 4096
#: The files of a converted corpus besides ``meta.json``.
DATA_FILES = ("pairs.arrow", "lang_pair.bin", "src_length.bin", "text_id.bin")
#: Bytes a converted row takes beyond its text: two string offsets and a line number in
#: ``pairs.arrow`` (16), and the integer arrays (22), rounded up.
ROW_OVERHEAD = 48
#: Room kept free beyond the estimate (``meta.json``, Arrow footers, the file system's blocks).
MARGIN = 1 << 20
_HASH_CHUNK = 1 << 23
T = TypeVar("T")


class CacheDamaged(Exception):
    """A cache folder does not match its files (internal: `build` converts again)."""


def content_key(paths: Sequence[Path], options_key: str) -> tuple[str, int]:
    """(xxh3-128 of the reading options and the files' bytes, the number of lines of the longest file)."""
    h = xxhash.xxh3_128()
    h.update(options_key.encode())
    lines = 0
    for path in paths:
        h.update(f"\x00{path.stat().st_size}\x00".encode())
        newlines = 0
        with path.open("rb") as f:
            while chunk := f.read(_HASH_CHUNK):
                h.update(chunk)
                newlines += chunk.count(b"\n")
        lines = max(lines, newlines + 1)
    return h.hexdigest(), lines


def need_bytes(size: int, rows: int) -> int:
    """The disk space a conversion of ``size`` input bytes in ``rows`` rows needs (an upper bound:
    the texts are at most their input bytes, each row adds `ROW_OVERHEAD`)."""
    return size + rows * ROW_OVERHEAD + MARGIN


def _amount(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def check_cache_dir(root: Path, need: int) -> None:
    """Refuse, before any conversion, a corpus cache that cannot be written or has too little space."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        failure: OSError | None = exc
    else:
        failure = write_error(root)
    if failure is not None:
        raise ResourceError(
            f"cannot write the corpus cache {root} ({failure.strerror or failure}): pass --cache-dir DIR "
            "(or set BABELSPACE_CACHE) to a writable folder"
        ) from None
    free = shutil.disk_usage(root).free
    if free < need:
        raise ResourceError(
            f"the corpus cache {root} has {_amount(free)} free; converting this corpus needs about "
            f"{_amount(need)}: free space or pass --cache-dir DIR on a larger disk"
        )


def _whole_hash(path: Path) -> str:
    h = xxhash.xxh3_64()
    with path.open("rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _sampled_hash(path: Path, size: int) -> str:
    h = xxhash.xxh3_64()
    last = max(0, size - SAMPLE_BYTES)
    starts = sorted({last * i // (SAMPLE_BLOCKS - 1) for i in range(SAMPLE_BLOCKS)})
    with path.open("rb") as f:
        for start in starts:
            f.seek(start)
            h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()


def _file_record(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {
        "bytes": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "xxh3": _whole_hash(path),
        "sampled_xxh3": _sampled_hash(path, st.st_size),
    }


def _file_problem(path: Path, record: Any) -> str | None:
    """Why ``path`` is not the file ``record`` (of `_file_record`) describes, or None."""
    if not isinstance(record, dict) or not {"bytes", "mtime_ns", "xxh3", "sampled_xxh3"} <= record.keys():
        return f"meta.json does not describe {path.name} (an older cache format)"
    try:
        st = path.stat()
    except FileNotFoundError:
        return f"{path.name} is missing"
    if st.st_size != record["bytes"]:
        return f"{path.name} has {st.st_size} bytes, meta.json says {record['bytes']}"
    if _sampled_hash(path, st.st_size) != record["sampled_xxh3"]:
        return f"{path.name} changed since it was written (its content hash differs)"
    if st.st_mtime_ns != record["mtime_ns"] and _whole_hash(path) != record["xxh3"]:
        return f"{path.name} changed since it was written (its content hash differs)"
    return None


def _checksum(meta: dict[str, Any]) -> str:
    body = {k: v for k, v in meta.items() if k != "checksum"}
    return xxhash.xxh3_64_hexdigest(json.dumps(body, sort_keys=True).encode())


def write_meta(folder: Path, meta: dict[str, Any], files: Sequence[str] = DATA_FILES) -> None:
    """Write ``meta.json`` (last): ``meta``, the record of every data file (``files``: size,
    modification time, whole and sampled content hashes) and the checksum of both."""
    meta = {**meta, "format": FORMAT_VERSION}
    meta["files"] = {name: _file_record(folder / name) for name in files}
    meta["checksum"] = _checksum(meta)
    (folder / "meta.json").write_text(json.dumps(meta))


def read_meta(folder: Path) -> dict[str, Any]:
    """``meta.json`` of a cache folder, checked against its checksum and the data files it records
    (see the module docstring); `CacheDamaged` (saying what is wrong) otherwise."""
    path = folder / "meta.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CacheDamaged("meta.json is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CacheDamaged(f"meta.json is not readable JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("checksum") != _checksum(meta):
        raise CacheDamaged("meta.json does not match its checksum")
    files = meta.get("files")
    if not isinstance(files, dict):
        raise CacheDamaged("meta.json lists no files")
    for name, record in files.items():
        problem = _file_problem(folder / name, record)
        if problem is not None:
            raise CacheDamaged(problem)
    return meta


def discard(folder: Path) -> None:
    """Remove a damaged cache folder (renamed away first, so no reader sees half of it)."""
    trash = folder.with_name(f".damaged-{folder.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        folder.rename(trash)
    except FileNotFoundError:  # another process removed it first
        return
    shutil.rmtree(trash, ignore_errors=True)


def _opened(folder: Path, open_: Callable[[Path], T], label: str) -> T | None:
    """``open_(folder)`` when the folder holds a sound conversion; None when there is none (a damaged
    one is reported and removed)."""
    if not folder.exists():
        return None
    try:
        found = open_(folder)
    except CacheDamaged as why:
        logger.warning("%s: the converted corpus %s is damaged (%s): converting it again", label, folder, why)
        discard(folder)
        return None
    logger.info("%s: using the converted corpus %s", label, folder)
    return found


def build(
    root: Path, key: str, convert: Callable[[Path], None], open_: Callable[[Path], T], label: str, need: int
) -> T:
    """The opened cache folder of ``key``: ``open_(folder)`` (which raises `CacheDamaged` on a
    mismatch), converting with ``convert(tmp)`` first when it is missing or damaged."""
    folder = root / key
    found = _opened(folder, open_, label)
    if found is not None:
        return found
    check_cache_dir(root, need)
    tmp = root / f".tmp-{key}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    logger.info("%s: converting into the Arrow cache %s (once)", label, folder)
    return publish(
        folder,
        tmp,
        convert,
        lambda: _opened(folder, open_, label),
        open_,
        failed=f"writing the corpus cache {root} failed ({{}}): pass --cache-dir DIR",
        unreadable=f"{label}: the corpus just converted into {folder} does not read back ({{}})",
    )


def publish(
    folder: Path,
    tmp: Path,
    write: Callable[[Path], None],
    reopen: Callable[[], T | None],
    open_: Callable[[Path], T],
    failed: str,
    unreadable: str,
) -> T:
    """Write a cache folder into ``tmp`` (``write(tmp)``), rename it to ``folder`` and open it. When the
    write or the rename fails, a folder another process published first (``reopen()``) is used; else
    ``failed`` (with ``{}`` for the OS error) is one `ResourceError`, as is ``unreadable`` (with ``{}``
    for why) when the new folder does not read back. ``tmp`` never outlives a failure."""
    try:
        write(tmp)
        tmp.rename(folder)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        found = reopen()
        if found is not None:
            return found
        raise ResourceError(failed.format(exc.strerror or exc)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        return open_(folder)
    except CacheDamaged as why:
        raise ResourceError(unreadable.format(why)) from None
