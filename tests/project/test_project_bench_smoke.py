"""Every benchmark still runs against the package as it is: each ``bench/*.py`` imports, its
``--help`` parses (one Python process for all of them), and every ``babelspace`` name it imports,
at the top or inside a function, exists, so an internal rename cannot break a benchmark silently."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "bench").glob("*.py"))

#: Run in one process: import each script as a module and call its main() with --help.
_HELP = """
import contextlib, io, json, runpy, sys
out = {}
for path in sys.argv[1:]:
    sys.argv = [path, "--help"]
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(path, run_name="__main__")
        out[path] = "no SystemExit: --help did not reach an argparse parser"
    except SystemExit as exc:
        out[path] = "ok" if exc.code in (0, None) and "usage:" in buf.getvalue() else f"exit {exc.code}"
    except BaseException as exc:
        out[path] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def babelspace_imports(source: str) -> list[tuple[str, str | None]]:
    """``(module, name)`` for every ``from babelspace... import name`` and ``(module, None)`` for every
    ``import babelspace...`` anywhere in ``source`` (functions included)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("babelspace")
        ):
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "babelspace"]
    return found


def missing_names(imports: list[tuple[str, str | None]]) -> list[str]:
    bad = []
    for module, name in imports:
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            bad.append(f"{module}: {exc}")
            continue
        if name is not None and not hasattr(mod, name):
            try:  # a submodule imported by name
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                bad.append(f"{module}.{name}")
    return bad


@pytest.mark.slow  # one process importing 22 scripts (torch, transformers): ~20 s of CPU
def test_every_bench_script_has_a_working_help() -> None:
    assert len(SCRIPTS) >= 20
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")}
    ran = subprocess.run(
        [sys.executable, "-c", _HELP, *map(str, SCRIPTS)],
        capture_output=True, text=True, env=env, cwd=ROOT / "bench", timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    results = json.loads(ran.stdout.strip().splitlines()[-1])
    assert {Path(p).name: r for p, r in results.items() if r != "ok"} == {}


def test_every_babelspace_name_a_bench_script_imports_exists() -> None:
    bad = {
        path.name: missing
        for path in SCRIPTS
        if (missing := missing_names(babelspace_imports(path.read_text(encoding="utf-8"))))
    }
    assert bad == {}


def test_the_import_check_sees_names_inside_functions() -> None:
    source = (
        "def f():\n    from babelspace.data.pairs import ParallelPair, NoSuchName\nimport babelspace.nope\n"
    )
    imports = babelspace_imports(source)
    assert sorted(imports, key=str) == sorted(
        [
            ("babelspace.nope", None),
            ("babelspace.data.pairs", "ParallelPair"),
            ("babelspace.data.pairs", "NoSuchName"),
        ],
        key=str,
    )
    assert sorted(missing_names(imports)) == [
        "babelspace.data.pairs.NoSuchName",
        "babelspace.nope: No module named 'babelspace.nope'",
    ]
