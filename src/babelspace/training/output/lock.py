"""One run per ``--out``: an exclusive ``fcntl.flock`` on a lock file beside the folder.

The lock file is ``PARENT/.NAME.lock`` next to the output folder's real path (a symlinked
``--out`` is locked at its target). It lives beside the folder, not inside it, because an export
swaps the whole folder (:func:`babelspace.training.output.folder.export_model_atomically`). The holder
writes ``pid``, ``host`` and start time into it, so a second run is refused with one line naming
the process that holds the folder. The kernel drops the lock when the holder exits, however it
exits, so a killed run never leaves a stale lock behind. The holder removes the file when it is done
(a run that locked a file since removed tries again), and parent folders it had to create for it
when they are left empty.

Within one process the lock is re-entrant (``train()`` called twice on the same folder, or the CLI
holding it across the end-of-run work while the trainer takes it again).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from babelspace.errors import TrainingError

__all__ = ["lock_path", "output_lock"]

_HELD: dict[Path, tuple[int, int, list[Path]]] = {}  # lock file -> (fd, depth, created parents)


def lock_path(output: Path) -> Path:
    """Where the lock of ``output`` lives (beside its real path)."""
    real = Path(output).resolve()
    return real.with_name(f".{real.name}.lock")


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        info = {}
    if not info:
        return "another process"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.get("since", 0)))
    return f"pid {info.get('pid', '?')} on host {info.get('host', '?')}, since {since}"


def _make_parents(folder: Path, output: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; return those created (outermost first)."""
    missing = [p for p in [folder, *folder.parents] if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrainingError(
            f"--out {output} is not writable: {folder} cannot be created ({exc.strerror}); choose "
            "another --out"
        ) from None
    return list(reversed(missing))


def _open_locked(path: Path, output: Path) -> int:
    """An fd holding the flock of the file now at ``path`` (retrying if the file was replaced)."""
    for _ in range(100):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise TrainingError(
                f"--out {output} is not writable: its lock file {path} cannot be created "
                f"({exc.strerror}); choose another --out"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise TrainingError(f"--out {output}: cannot lock {path} ({exc.strerror})") from None
            raise TrainingError(
                f"--out {output} is in use by another babelspace run ({_holder(path)}); wait for it "
                "to finish or choose another --out"
            ) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the previous holder removed the file after we opened it: open the new one
    raise TrainingError(f"--out {output}: could not take the lock {path}; try again")


def _acquire(path: Path, output: Path) -> tuple[int, list[Path]]:
    created = _make_parents(path.parent, output)
    fd = _open_locked(path, output)
    info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(info).encode(), 0)
    return fd, created


def _release(path: Path, fd: int, created: list[Path]) -> None:
    try:
        path.unlink()  # while still holding the lock: a waiter that opened it retries
    except OSError:
        pass
    os.close(fd)  # releases the flock
    for folder in reversed(created):
        try:
            folder.rmdir()  # only when empty
        except OSError:
            break


@contextmanager
def output_lock(output: str | Path) -> Iterator[Path]:
    """Hold the exclusive lock of ``output`` for the ``with`` block (re-entrant in one process).

    Raises :class:`TrainingError` naming the holder (pid, host, start time) when another process
    holds it."""
    path = lock_path(output)
    fd, depth, created = _HELD.get(path, (-1, 0, []))
    if depth == 0:
        fd, created = _acquire(path, Path(output))
    _HELD[path] = (fd, depth + 1, created)
    try:
        yield path
    finally:
        fd, depth, created = _HELD.pop(path)
        if depth > 1:
            _HELD[path] = (fd, depth - 1, created)
        else:
            _release(path, fd, created)
