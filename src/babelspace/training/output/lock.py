"""One run per ``--out``: an exclusive lock (``filelock.FileLock``: ``flock`` on Unix, ``msvcrt`` on
Windows) on a lock file beside the folder.

The lock file is ``PARENT/.NAME.lock`` next to the output folder's real path (a symlinked
``--out`` is locked at its target). It lives beside the folder, not inside it, because an export
swaps the whole folder (:func:`babelspace.training.output.folder.export_model_atomically`). The holder
writes ``pid``, ``host`` and start time into it, so a second run is refused with one line naming
the process that holds the folder. The operating system drops the lock when the holder exits,
however it exits, so a killed run never leaves a stale lock behind. The holder removes the file when
it is done (a run that locked a file since removed tries again), and parent folders it had to create
for it when they are left empty.

Within one process the lock is re-entrant (``train()`` called twice on the same folder, or the CLI
holding it across the end-of-run work while the trainer takes it again).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from babelspace.errors import TrainingError

__all__ = ["lock_path", "output_lock"]

_HELD: dict[Path, tuple[FileLock, int, list[Path]]] = {}  # lock file -> (lock, depth, created parents)


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


def _same_file(path: Path, fd: int) -> bool:
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except OSError:
        return False


def _write_holder(fd: int) -> None:
    info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()})
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, info.encode())


def _take(path: Path, output: Path) -> FileLock:
    """The held lock of the file now at ``path`` (retrying if the file was replaced meanwhile)."""
    for _ in range(100):
        fds: list[int] = []
        lock = FileLock(path, timeout=0, fallback_to_soft=False, on_acquired=fds.append)
        try:
            lock.acquire()
        except Timeout:
            raise TrainingError(
                f"--out {output} is in use by another babelspace run ({_holder(path)}); wait for it "
                "to finish or choose another --out"
            ) from None
        except OSError as exc:
            raise TrainingError(
                f"--out {output} is not writable: its lock file {path} cannot be created or locked "
                f"({exc.strerror}); choose another --out"
            ) from None
        if fds and _same_file(path, fds[0]):
            _write_holder(fds[0])
            return lock
        lock.release()  # the previous holder removed the file after we opened it: lock the new one
    raise TrainingError(f"--out {output}: could not take the lock {path}; try again")


def _acquire(path: Path, output: Path) -> tuple[FileLock, list[Path]]:
    created = _make_parents(path.parent, output)
    return _take(path, output), created


def _release(path: Path, lock: FileLock, created: list[Path]) -> None:
    try:
        path.unlink()  # while still holding the lock: a waiter that opened it retries
    except OSError:
        pass  # Windows: an open file cannot be removed; it stays, unlocked
    lock.release()
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
    if path in _HELD:
        lock, depth, created = _HELD[path]
    else:
        (lock, created), depth = _acquire(path, Path(output)), 0
    _HELD[path] = (lock, depth + 1, created)
    try:
        yield path
    finally:
        lock, depth, created = _HELD.pop(path)
        if depth > 1:
            _HELD[path] = (lock, depth - 1, created)
        else:
            _release(path, lock, created)
