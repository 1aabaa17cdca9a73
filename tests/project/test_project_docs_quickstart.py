"""The README quickstart runs as written on the sample the repository ships in ``examples/`` (issue 43
item 5): its commands are read from README.md between the quickstart markers, not copied here."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import babelspace

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- quickstart:begin -->", "<!-- quickstart:end -->"


def quickstart_blocks(text: str) -> tuple[list[str], str]:
    """``(shell commands, python code)`` of the README's quickstart: every line of its ``bash``
    blocks (comments and blank lines left out) and its ``python`` block."""
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "one quickstart between the markers"
    part = text.split(BEGIN, 1)[1].split(END, 1)[0]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```", part, re.M | re.S)
    commands = [
        line.strip()
        for lang, body in blocks
        if lang == "bash"
        for line in body.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    python = [body for lang, body in blocks if lang == "python"]
    assert len(python) == 1, "one python block in the quickstart"
    return commands, python[0]


def test_the_quickstart_uses_the_shipped_sample_and_parses() -> None:
    from babelspace.cli import build_parser

    commands, python = quickstart_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert [c.split()[:2] for c in commands] == [
        ["babelspace", "train"],
        ["babelspace", "eval"],
        ["babelspace", "encode"],
    ]
    parser = build_parser()
    for command in commands:
        parser.parse_args(shlex.split(command)[1:])  # exits (fails the test) on a bad flag
        for word in shlex.split(command):
            if word.startswith("examples/"):
                assert (ROOT / word).is_file(), word
    assert "SentenceTransformer(" in python and "babelspace" not in python.replace("no babelspace import", "")
    sample = sum(p.stat().st_size for p in (ROOT / "examples").iterdir())
    assert sample < 200_000, f"examples/ is {sample} bytes"


@pytest.mark.slow
def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    """train -> eval -> encode -> plain sentence-transformers, in a scratch folder holding the sample."""
    commands, python = quickstart_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    src = str(Path(babelspace.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
    }
    outputs = []
    for command in commands:
        words = shlex.split(command)
        argv = [sys.executable, "-m", "babelspace", *words[1:]] if words[0] == "babelspace" else words
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
    assert (tmp_path / "runs" / "quickstart" / "modules.json").is_file()
    assert "xsim" in outputs[1] and "tatoeba" in outputs[1]
    vectors = np.load(tmp_path / "runs" / "vectors.npy")
    lines = (ROOT / "examples" / "sentences.txt").read_text(encoding="utf-8").splitlines()
    assert vectors.shape == (len(lines), 384) and np.isfinite(vectors).all()
    done = subprocess.run(
        [sys.executable, "-c", python], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("tensor([[") and done.stdout.count("[") == 4  # a 3 x 3 similarity matrix
