"""The built wheel installs into a fresh environment and its CLI starts (issue 33 item 2): the wheel
is built from a copy of the project, installed with ``--no-deps`` into a throwaway venv whose path
ends with this (the CI) environment's site-packages, and ``babelspace --help`` runs from it. The CI
environment's ``.pth`` files are not read there, so its editable babelspace stays out of sight."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*cmd: str | Path, timeout: int = 300) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: {proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.slow
def test_the_wheel_installs_and_its_cli_runs(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    dist = tmp_path / "dist"
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist)]
    _run(*build, project)
    (wheel,) = dist.glob("babelspace-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "babelspace/cli/__init__.py" in names and any(n.endswith("licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in meta and "Requires-Dist: filelock>=4.0" in meta

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    bindir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    python = bindir / ("python.exe" if sys.platform == "win32" else "python")
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    ci_paths = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site) / "ci_environment.pth").write_text("\n".join(ci_paths) + "\n", encoding="utf-8")
    _run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel)
    where = _run(python, "-c", "import babelspace; print(babelspace.__file__)").strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where  # the wheel's copy, not the checkout
    cli = shutil.which("babelspace", path=str(bindir))
    assert cli and Path(cli).parent == bindir
    out = _run(cli, "--help")
    assert "usage: babelspace" in out and "train" in out and "push" in out
