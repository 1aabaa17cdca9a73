"""The output lock (training/output/lock.py) is filelock's, with the holder written into it."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from filelock import FileLock

from babelspace.errors import TrainingError
from babelspace.training.output.lock import _HELD, lock_path, output_lock


def test_the_holder_is_recorded_and_a_second_holder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "a" / "run"
    with output_lock(out) as path:
        assert path == lock_path(out) and isinstance(_HELD[path][0], FileLock)
        info = json.loads(path.read_text(encoding="utf-8"))
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        other = FileLock(path, timeout=0)  # what another process would try
        with pytest.raises(TimeoutError):
            other.acquire()
    assert not path.exists() and not (tmp_path / "a").exists()  # the folder it created is gone


def test_a_lock_file_replaced_while_waiting_is_locked_again(tmp_path: Path, monkeypatch) -> None:
    """A holder removes its file while a newcomer has it open: the newcomer locks the new file."""
    import babelspace.training.output.lock as lock_mod

    out = tmp_path / "run"
    path = lock_path(out)
    real = lock_mod._same_file
    calls: list[int] = []

    def replaced_once(p: Path, fd: int) -> bool:
        calls.append(fd)
        return real(p, fd) and len(calls) > 1

    monkeypatch.setattr(lock_mod, "_same_file", replaced_once)
    with output_lock(out):
        assert len(calls) == 2 and path.exists()
    with pytest.raises(TrainingError, match="in use by another babelspace run"):
        holder = FileLock(path, timeout=0)
        holder.acquire()
        try:
            with output_lock(out):
                pass
        finally:
            holder.release()
