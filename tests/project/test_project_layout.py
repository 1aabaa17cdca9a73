"""The package's shape as tests: imports run one way (no cycle, function-level imports included),
each name is defined once (no re-export shims), every package has an ``__init__.py``, every
subcommand flag has help text, and the shared flags have one spelling."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "src" / "babelspace"


def _modules() -> dict[str, Path]:
    mods = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _imports(mod: str, path: Path, known: set[str]) -> set[str]:
    """Every babelspace module ``mod`` imports, at module level or inside functions."""
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            parent = ".".join(base[: len(base) - node.level + 1] + [node.module or ""]).strip(".")
            name = parent if node.level else node.module or ""
            targets = [name, *(f"{name}.{a.name}" for a in node.names)]
        else:
            continue
        out.update(t for t in targets if t in known and t != mod)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, set(mods)) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_cycle_detector_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


@pytest.mark.parametrize(
    ("low", "high"),
    [
        ("retrieval", "metrics"),
        ("metrics", "evaluation"),
        ("retrieval", "mining"),
        ("objectives", "training"),
        ("models", "training"),
        ("data", "training"),
        ("evaluation", "training"),
        ("models", "objectives"),
    ],
)
def test_imports_point_down_the_flow(low: str, high: str) -> None:
    """A lower layer never imports a higher one (``retrieval`` -> ``metrics`` -> ``evaluation``)."""
    up = [
        (m, t)
        for m, targets in import_graph().items()
        if m.startswith(f"babelspace.{low}")
        for t in targets
        if t.startswith(f"babelspace.{high}")
    ]
    assert up == []


def test_mining_core_threshold_pipeline_one_way() -> None:
    g = import_graph()
    assert "babelspace.mining.pipeline" not in g["babelspace.mining.threshold"]
    assert "babelspace.mining.threshold" not in g["babelspace.mining.core"]


def test_every_package_has_an_init() -> None:
    missing = [
        str(d.relative_to(PKG.parent))
        for d in PKG.rglob("*")
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")) and not (d / "__init__.py").exists()
    ]
    assert missing == []


def test_each_name_defined_once_no_reexports() -> None:
    """``__all__`` lists only what the module defines, and no module aliases an imported name."""
    offenders = []
    for mod, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined: set[str] = set()
        imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
        exported: list[str] = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        defined.add(t.id)
                        if t.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                            exported = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
                        elif isinstance(node.value, ast.Name) and node.value.id in imported:
                            offenders.append(f"{mod}: {t.id} = {node.value.id}")
        if mod == "babelspace":  # the one public API surface: babelspace.api's names, served lazily
            exported = [n for n in exported if n not in _api_names()]
        offenders += [f"{mod}: __all__ re-exports {n}" for n in exported if n not in defined]
    assert offenders == []


def _api_names() -> list[str]:
    tree = ast.parse((PKG / "api.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "__all__")
    return [e.value for e in node.value.elts]


def test_the_top_level_serves_exactly_the_api_and_imports_nothing_heavy() -> None:
    """The one exception to "no re-exports": ``babelspace.<name>`` for exactly the names of
    ``babelspace.api.__all__``, resolved on first use (``import babelspace`` imports no torch)."""
    import subprocess
    import sys

    import babelspace
    from babelspace import api

    assert sorted(babelspace.__all__) == sorted(api.__all__) == sorted(_api_names())
    assert all(getattr(babelspace, n) is getattr(api, n) for n in api.__all__)
    assert set(api.__all__) <= set(dir(babelspace))
    with pytest.raises(AttributeError):
        babelspace.mine_files  # noqa: B018 - only the API is served, not the library's internals
    code = "import sys, babelspace; babelspace.train; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from babelspace.cli import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_flag_has_help_text() -> None:
    missing = [
        f"{cmd} {a.option_strings[0]}"
        for cmd, p in _subparsers().items()
        for a in p._actions
        if a.option_strings and a.help is None and not isinstance(a, argparse._HelpAction)
    ]
    assert missing == []


def test_shared_flags_have_one_spelling() -> None:
    """Output is ``--out`` and progress is ``--no-progress`` in every command that has them."""
    visible = {
        cmd: {s for a in p._actions if a.help != argparse.SUPPRESS for s in a.option_strings}
        for cmd, p in _subparsers().items()
    }
    for cmd, flags in visible.items():
        assert not flags & {"--output", "--json", "--quiet", "--max-len"}, cmd
    for cmd in ("train", "encode", "mine", "export", "eval"):
        assert "--out" in visible[cmd], cmd
    for cmd in ("eval", "mine"):
        assert "--no-progress" in visible[cmd], cmd


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--output", "somewhere"],
        ["eval", "m", "--json", "r.json"],
        ["mine", "--src", "a", "--tgt", "b", "--model", "m", "--out", "o", "--quiet"],
        ["decode", "m", "--checkpoint", "c", "--max-len", "12", "text"],
    ],
)
def test_old_spellings_are_gone(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """The unreleased package keeps no deprecated aliases: the old spelling is an unknown flag."""
    from babelspace.cli import build_parser

    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_objective_names_are_case_insensitive_and_checked_before_loading() -> None:
    from babelspace.errors import TrainingError
    from babelspace.objectives import OBJECTIVES, objective_class
    from babelspace.training.config import TrainConfig
    from babelspace.training.setup.factory import _BUILDERS

    cfg = TrainConfig(objective="Mexma")
    assert cfg.objective == "mexma" and cfg.objective_names == ["mexma"]
    assert TrainConfig(objective=" MEXMA + Distill ").objective == "mexma+distill"
    with pytest.raises(TrainingError, match="unknown objective"):
        TrainConfig(objective="labse")
    assert set(_BUILDERS) == set(OBJECTIVES)
    for name in OBJECTIVES:
        cls = objective_class(name)
        assert cls.name == name and cls.__name__.endswith("Objective")


def test_layout_doc_names_every_module() -> None:
    """docs/layout.md is the map of the package: every module's file name appears in it."""
    text = (PKG.parents[1] / "docs" / "layout.md").read_text(encoding="utf-8")
    missing = sorted(
        str(p.relative_to(PKG))
        for p in PKG.rglob("*.py")
        if p.name != "__init__.py" and p.stem not in text and p.name not in text
    )
    assert missing == [], f"docs/layout.md does not name: {', '.join(missing)}"
