"""Temporaries a killed run left beside its shards (``.shard-00000.npy.tmp-*``,
``.manifest.json.tmp-*``) are removed by the next run over that folder, even one that reuses every
shard; a live writer's temporaries are kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from babelspace.cli import main
from babelspace.writable import remove_stale_temporaries, temp_sibling


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _temp_of(path: Path, pid: int) -> Path:
    name = temp_sibling(path).name
    mark = f".tmp-{os.getpid()}-"
    return path.with_name(name.replace(mark, f".tmp-{pid}-"))


def test_only_temporaries_of_dead_processes_go(tmp_path) -> None:
    dead = _temp_of(tmp_path / "shard-00000.npy", _dead_pid())
    live = _temp_of(tmp_path / "shard-00001.npy", os.getppid())
    mine = temp_sibling(tmp_path / "manifest.json")
    user = tmp_path / ".notes.tmp-keep"
    for p in (dead, live, mine, user):
        p.write_bytes(b"x")
    assert remove_stale_temporaries(tmp_path) == 1
    assert not dead.exists() and live.exists() and mine.exists() and user.exists()


def test_a_rerun_that_reuses_every_shard_removes_a_killed_runs_temporaries(tmp_path, tiny_model_dir) -> None:
    (tmp_path / "a.en").write_text("a house\na tree\nthe sun\n")
    (tmp_path / "a.de").write_text("ein Haus\nein Baum\ndie Sonne\n")
    argv = ["mine", "--src", str(tmp_path / "a.en"), "--tgt", str(tmp_path / "a.de"), "--model"]
    argv += [str(tiny_model_dir), "--out", str(tmp_path / "p.tsv"), "--threshold", "0", "--no-progress"]
    assert main(argv) == 0
    side = tmp_path / "p.work" / "src"
    pid = _dead_pid()
    left = [_temp_of(side / "shard-00000.npy", pid), _temp_of(side / "manifest.json", pid)]
    for p in left:
        p.write_bytes(b"half a file")
    assert main(argv) == 0
    assert not any(p.exists() for p in left)
