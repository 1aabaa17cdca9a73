"""The one atomic file write (babelspace.writable): a hidden temporary beside the file, renamed over
it when complete, removed on any failure."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from babelspace.writable import atomic_open, atomic_path, atomic_write_bytes, atomic_write_text


def test_the_temporary_is_hidden_beside_the_file_and_the_old_file_stays_until_the_rename(
    tmp_path: Path,
) -> None:
    target = tmp_path / "scores.json"
    target.write_text("old")
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path
        assert re.fullmatch(rf"\.scores\.json\.tmp-{os.getpid()}-[0-9a-f]{{8}}", tmp.name)
        tmp.write_text("new")
        assert target.read_text() == "old"  # a reader sees the whole old file until the end
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.json"]


def test_two_writes_get_different_temporaries(tmp_path: Path) -> None:
    with atomic_path(tmp_path / "a") as one, atomic_path(tmp_path / "a") as two:
        assert one != two
        one.write_text("1")
        two.write_text("2")
    assert (tmp_path / "a").read_text() == "1"  # the outer block ends last: its rename wins
    assert [p.name for p in tmp_path.iterdir()] == ["a"]


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_a_failure_removes_the_temporary_and_keeps_the_old_file(tmp_path: Path, error: BaseException) -> None:
    target = tmp_path / "out.tsv"
    target.write_text("complete old output\n")
    with pytest.raises(type(error)), atomic_open(target) as fh:
        fh.write("half of the new")
        raise error
    assert target.read_text() == "complete old output\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.tsv"]


def test_a_failure_before_anything_is_written_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError), atomic_path(tmp_path / "new.npy"):
        raise ValueError("refused")
    assert list(tmp_path.iterdir()) == []


def test_text_bytes_and_binary_writers(tmp_path: Path) -> None:
    assert atomic_write_text(tmp_path / "t.txt", "café\n").read_bytes() == "café\n".encode()
    assert atomic_write_bytes(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    with atomic_open(tmp_path / "v.npz", "wb") as fh:  # np.savez on a path would append ".npz"
        np.savez(fh, x=np.arange(3))
    assert np.load(tmp_path / "v.npz")["x"].tolist() == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin", "t.txt", "v.npz"]
