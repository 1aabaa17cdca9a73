"""The lint is part of the test command: `ruff check` (incl. the complexity limits configured in
pyproject.toml) and `ruff format --check` over the package, the tests and the benchmarks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ["src", "tests", "bench"]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(command: list[str]) -> None:
    pytest.importorskip("ruff", reason="ruff is in the dev extra the README installs")
    ran = subprocess.run(
        [sys.executable, "-m", "ruff", *command, *TARGETS], cwd=ROOT, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
