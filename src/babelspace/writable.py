"""Whether an output path can be written without harm: the one write probe behind every "is this
writable" check (output folder, caches, ``--out`` files: :func:`write_error`, a real file, never
``os.access``, which says yes to root everywhere), the one check that an output never lands on an
input of the same command (:func:`check_output_apart`), and the one check every command runs on each
file or folder it will write (:func:`check_output`: both of those, before any work), so each caller
only names its paths; the one atomic file write (:func:`atomic_path`): a temporary
``.NAME.tmp-<pid>-<random>`` beside the file, synced and renamed over it, removed on any failure; and
the one JSON writer (:func:`write_json`): strict JSON, no ``NaN`` or ``Infinity``."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from babelspace.errors import BabelspaceError

logger = logging.getLogger(__name__)

#: Name prefix of the probe files (a listing of a folder may skip them).
PROBE_PREFIX = ".babelspace-write-test"

#: In the name of every temporary file :func:`atomic_path` writes (``.NAME.tmp-<pid>-<random>``).
TEMP_MARK = ".tmp-"

#: ``(flag, path)``: where a command reads, named by the flag the user gave it with.
Named = tuple[str, "str | Path | None"]


def write_error(folder: Path) -> OSError | None:
    """The error a new file in ``folder`` meets (``None`` if it can be written and removed)."""
    probe = Path(folder) / f"{PROBE_PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return exc
    return None


def dangling_link(path: str | Path) -> str | None:
    """Where ``path`` points when it is a symbolic link to nothing (``None`` otherwise)."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        return os.readlink(path)
    return None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _same(a: Path, b: Path) -> bool:
    """One file or folder, however spelled: resolved paths, or device and inode (hard links)."""
    if a.resolve() == b.resolve():
        return True
    ia = _identity(a)
    return ia is not None and ia == _identity(b)


def _inside(path: Path, folder: Path) -> bool:
    """``path`` lies strictly inside ``folder`` (checked on every existing ancestor's inode too)."""
    if folder.resolve() in path.resolve().parents:
        return True
    target = _identity(folder)
    if target is None:
        return False
    return any(_identity(p) == target for p in path.resolve().parents if p.exists())


def _is_eval_report(path: Path) -> bool:
    """``path`` holds an earlier ``babelspace eval --out`` report (rewriting it harms no model)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and {"model", "tasks", "config"} <= data.keys()


def _local(paths: Iterable[Named]) -> list[tuple[str, Path]]:
    return [(flag, Path(p)) for flag, p in paths if p is not None and str(p) and Path(p).exists()]


def _chosen(flag: str) -> str:
    """The flag a user changes to move an output: ``--out`` for its side files (``--out's summary``)."""
    return flag.split("'s ")[0]


def check_output_apart(
    out: str | Path,
    flag: str,
    *,
    inputs: Iterable[Named] = (),
    models: Iterable[Named] = (),
    folder: bool = False,
    report_beside_model: bool = False,
) -> None:
    """Refuse, before any work, an output that would overwrite what the same command reads.

    ``inputs`` are the files and folders the command reads, ``models`` the model folders it loads
    (names such as ``minilm`` or Hub ids are not local and are skipped). Refused: ``out`` is an input
    (resolved paths and inodes, so symlinks, hard links and ``./`` spellings count), lies inside an
    input folder or a model folder, or (``folder``: a folder output) holds an input or a model.
    ``report_beside_model`` lets an evaluation report go into the model folder as a new file (or
    over an earlier report), never over a file of the model. A dangling symbolic link is refused
    when its target cannot be created (a folder output: always), naming where it points.

    Raises :class:`BabelspaceError` naming both paths and the flags they came from."""
    out = Path(out)
    _check_link(out, flag, folder)
    for in_flag, path in _local(inputs):
        if _same(out, path):
            raise BabelspaceError(
                f"{flag} {out} is the input {in_flag} {path}: writing it would destroy the input; "
                f"choose another {_chosen(flag)}"
            )
        if path.is_dir() and _inside(out, path):
            raise BabelspaceError(
                f"{flag} {out} lies inside the input folder {in_flag} {path}; choose a {_chosen(flag)} outside it"
            )
        if folder and _inside(path, out):
            raise BabelspaceError(
                f"{flag} {out} holds the input {in_flag} {path}; choose a {_chosen(flag)} that does not contain "
                "the inputs"
            )
    for in_flag, path in _local(models):
        if not path.is_dir():
            continue
        if _same(out, path) or (_inside(out, path) and not _report_allowed(out, report_beside_model)):
            what = "" if _same(out, path) else "a file of " if out.is_file() else "inside "
            raise BabelspaceError(
                f"{flag} {out} is {what}the model folder {path} ({in_flag}), which this command reads; "
                f"choose a {_chosen(flag)} outside it"
                + ("" if not report_beside_model else " (or a new file name beside the model)")
            )
        if folder and _inside(path, out):
            raise BabelspaceError(
                f"{flag} {out} holds the model folder {path} ({in_flag}), which this command reads; "
                f"choose a {_chosen(flag)} that does not contain it"
            )


def _report_allowed(out: Path, beside_model: bool) -> bool:
    return beside_model and (not out.exists() or (out.is_file() and _is_eval_report(out)))


def _check_link(out: Path, flag: str, folder: bool) -> None:
    target = dangling_link(out)
    if target is None:
        return
    resolved = out.resolve()
    if folder or not resolved.parent.is_dir():
        raise BabelspaceError(
            f"{flag} {out} is a dangling symbolic link: it points to {target}, which does not exist; "
            f"create {resolved} or remove the link, or choose another {_chosen(flag)}"
        )


def check_writable(path: str | Path, flag: str, *, folder: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written: a file output that is a folder or
    an existing file that cannot be opened for writing, a folder output that is a file, a path under a
    regular file, or a place whose nearest existing folder refuses a real probe file
    (:func:`write_error`). Raises :class:`BabelspaceError` naming ``flag`` and the path."""
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise BabelspaceError(f"{flag} {path} is a file; give a folder path")
        _check_writable_parent(path / "x", flag, shown=path)
        return
    if path.is_dir():
        raise BabelspaceError(f"{flag} {path} is a folder; give a file path")
    if path.exists():
        try:
            with open(path, "ab"):  # appends nothing: the file is unchanged
                pass
        except OSError as exc:
            raise BabelspaceError(f"{flag} {path} is not writable ({exc.strerror})") from None
    _check_writable_parent(path, flag)  # the atomic write puts a new file beside it


def _check_writable_parent(path: Path, flag: str, shown: Path | None = None) -> None:
    """The nearest existing folder above ``path`` must be a folder that accepts a new file."""
    shown = shown or path
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BabelspaceError(
                    f"{flag} {shown}: {parent} is a file, not a folder; choose another {_chosen(flag)}"
                )
            exc = write_error(parent)
            if exc is not None:
                raise BabelspaceError(
                    f"{flag} {shown} is not writable: {parent} does not accept new files ({exc.strerror}); "
                    f"choose another {_chosen(flag)}"
                ) from None
            return


def check_output(
    out: str | Path,
    flag: str,
    *,
    inputs: Iterable[Named] = (),
    models: Iterable[Named] = (),
    folder: bool = False,
    report_beside_model: bool = False,
) -> None:
    """The check every command runs, before any work, on each file or folder it will write (the
    output, its side files and summary, its work folder): the output is apart from everything the
    command reads (:func:`check_output_apart`) and can be written (:func:`check_writable`)."""
    inputs, models = list(inputs), list(models)
    check_output_apart(
        out, flag, inputs=inputs, models=models, folder=folder, report_beside_model=report_beside_model
    )
    check_writable(out, flag, folder=folder)


def _finite(obj: Any, where: str, found: dict[str, str]) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        found[where or "."] = "NaN" if obj != obj else "Infinity" if obj > 0 else "-Infinity"
        return None
    if isinstance(obj, dict):
        return {k: _finite(v, f"{where}.{k}" if where else str(k), found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v, f"{where}[{i}]", found) for i, v in enumerate(obj)]
    return obj


def write_json(path: str | Path, payload: Any, *, indent: int | None = 2) -> Path:
    """Write ``payload`` as strict JSON (RFC 8259, which has no ``NaN`` or ``Infinity``: a strict
    parser rejects them), atomically; returns ``path``.

    A non-finite float is written as ``null`` and named, with what it was, under the top-level key
    ``"non_finite"`` (``{"threshold": "Infinity"}``, nested keys dotted, list items ``[i]``), so
    nothing is lost and every reader can parse the file; a payload that is not an object cannot
    carry that record and is refused (``ValueError``) when it holds one."""
    found: dict[str, str] = {}
    data = _finite(payload, "", found)
    if found:
        if not isinstance(data, dict):
            raise ValueError(f"{path}: non-finite values at {', '.join(found)} (JSON has no NaN or Infinity)")
        data = {**data, "non_finite": found}
    text = json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)
    return atomic_write_text(path, text + "\n")


def temp_sibling(path: str | Path) -> Path:
    """A fresh temporary name beside ``path``: ``.NAME.tmp-<pid>-<random>`` (hidden, same folder, so
    the final rename stays on one file system, and unique per process and call)."""
    path = Path(path)
    return path.with_name(f".{path.name}{TEMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)  # Windows syncs writable handles only
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_TEMP_NAME = re.compile(r"^\..+" + re.escape(TEMP_MARK) + r"(\d+)-[0-9a-f]{8}$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(folder: str | Path) -> int:
    """Remove the temporaries (:func:`temp_sibling` names) that a killed process left in ``folder``:
    those whose process no longer runs (a live writer's are kept). Returns how many went."""
    folder = Path(folder)
    removed = 0
    if not folder.is_dir():
        return 0
    for path in folder.iterdir():
        found = _TEMP_NAME.match(path.name)
        if found and int(found.group(1)) != os.getpid() and not _alive(int(found.group(1))):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
    if removed:
        logger.warning("removed %d temporary file(s) an interrupted run left in %s", removed, folder)
    return removed


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path for a writer that needs one; when the block ends normally the file is synced
    and renamed over ``path`` in one step (readers see the old file or the new, never half of one);
    on any failure, interrupts included, it is removed and ``path`` is left as it was. A symbolic
    link is followed, not replaced: the file it points to is written (and created if missing)."""
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    tmp = temp_sibling(path)
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """:func:`atomic_path` as an open file (``mode`` ``"w"`` or ``"wb"``; no encoding in binary)."""
    with atomic_path(path) as tmp, open(tmp, mode, encoding=None if "b" in mode else encoding) as fh:
        yield fh


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`); returns ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`); returns ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding=encoding)
    return Path(path)
