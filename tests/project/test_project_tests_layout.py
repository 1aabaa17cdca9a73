"""The tests mirror the package (docs/layout.md): ``tests/<area>/test_<area>_<topic>.py`` for a
subpackage or top-level module of babelspace, ``tests/project/`` for project-wide checks; no
``__init__.py`` (pytest's importlib mode names modules by path); and every ``tests/...py`` path that
the docs, the benchmarks or the code cite exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PKG = ROOT / "src" / "babelspace"

#: Folders of tests/ that hold no tests: data files, and scripts that tests launch by path.
SUPPORT = {"fixtures", "workers"}


def areas() -> set[str]:
    """The names a test folder may have: babelspace's subpackages and top-level modules, and
    ``project``."""
    subpackages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    modules = {p.stem for p in PKG.glob("*.py") if not p.stem.startswith("_")}
    return subpackages | modules | {"project"}


def misplaced(test_files: list[Path], allowed: set[str]) -> list[str]:
    """The test files (relative to tests/) that break the naming rule."""
    bad = []
    for rel in test_files:
        area = rel.parts[0] if len(rel.parts) == 2 else None
        if area not in allowed or not rel.name.startswith(f"test_{area}_"):
            bad.append(str(rel))
    return bad


def _test_files() -> list[Path]:
    return sorted(p.relative_to(TESTS) for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def test_every_test_file_is_named_for_its_area() -> None:
    files = _test_files()
    assert len(files) > 80
    assert misplaced(files, areas()) == []


def test_the_rule_catches_flat_foreign_and_misnamed_files() -> None:
    allowed = {"data", "mining", "writable", "project"}
    files = [
        Path("test_config.py"),  # flat
        Path("data/test_data_arrow.py"),
        Path("data/test_mining_score.py"),  # another area's prefix
        Path("mining/test_mining.py"),  # no topic
        Path("bitext/test_bitext_score.py"),  # not a package area
        Path("data/sub/test_data_x.py"),  # too deep
        Path("writable/test_writable_atomic_write.py"),
    ]
    assert misplaced(files, allowed) == [
        "test_config.py",
        "data/test_mining_score.py",
        "mining/test_mining.py",
        "bitext/test_bitext_score.py",
        "data/sub/test_data_x.py",
    ]


def test_test_file_names_are_unique_and_no_init_files() -> None:
    names = [p.name for p in _test_files()]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    assert sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("__init__.py")) == []
    for folder in SUPPORT:
        assert not list((TESTS / folder).rglob("test_*.py")), folder


def test_cited_test_paths_exist() -> None:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for folder in ("src", "bench", "tests"):
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in {".py", ".sh", ".md"})
    cited = {
        (path.relative_to(ROOT), target)
        for path in files
        for target in re.findall(r"\btests/[\w/]+\.py", path.read_text(encoding="utf-8", errors="replace"))
    }
    assert len(cited) > 20
    assert sorted((str(f), t) for f, t in cited if not (ROOT / t).is_file()) == []
