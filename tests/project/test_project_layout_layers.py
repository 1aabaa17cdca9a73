"""Imports run down the layers, and an import is deferred into a function only where that keeps
``babelspace --help`` fast.

The layers, low to high (docs/layout.md): shared utilities (with ``checkpoints`` and ``vectors``), ``data``, ``resources`` (with
``hashing``, keyed by its cache), ``models`` and ``retrieval``, ``metrics``, ``evaluation`` and
``objectives``, ``mining``, ``training``, ``integrations``, ``api``, ``cli`` (with ``__main__``), the package's ``__init__``.
No import, at module level or inside a function, reaches a higher layer.

A function-level import of a babelspace module is allowed in a module that ``--help`` loads when
``--help`` does not load its target (deferring it is what keeps ``--help`` off torch); anywhere
else it is listed in :data:`DEFERRED_UNJUSTIFIED`, so that the list only shrinks.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from tests.project.test_project_layout import _modules, import_graph

LAYERS = {
    "": 0,
    "checkpoints": 0,
    "vectors": 0,
    "data": 1,
    "resources": 2,
    "hashing": 2,
    "models": 3,
    "retrieval": 3,
    "metrics": 4,
    "evaluation": 5,
    "objectives": 5,
    "mining": 6,
    "training": 7,
    "integrations": 8,
    "api": 9,
    "cli": 10,
    "__main__": 10,
}

#: The package itself: its ``__init__`` serves the API's names (imported on first use).
TOP = max(LAYERS.values())

#: Function-level imports that ``--help`` does not justify (module -> targets, without the
#: ``babelspace.`` prefix): in a module ``--help`` does not load, or of a target ``--help`` loads
#: anyway. Each could be a module-level import; the list records what is left and may only shrink.
DEFERRED_UNJUSTIFIED: dict[str, set[str]] = {
    "api": {
        "data.languages",
        "data.mix",
        "data.readers",
        "errors",
        "evaluation.config",
        "evaluation.report",
        "evaluation.runner",
        "mining.align",
        "mining.align_docs",
        "mining.align_dp",
        "mining.core",
        "mining.corpus",
        "mining.encode",
        "mining.filters",
        "mining.pipeline",
        "mining.score",
        "models.backends",
        "models.encoder",
        "models.static",
        "training.config",
        "training.config_file",
        "training.output.model_card",
        "training.recipes",
        "training.run",
        "writable",
    },
    "cli": {
        "cli.align",
        "cli.decode",
        "cli.encode",
        "cli.eval",
        "cli.export",
        "cli.mine",
        "cli.mteb",
        "cli.push",
        "cli.resources",
        "cli.score",
        "cli.train",
    },
    "cli.align": {
        "mining.align_dp",
    },
    "cli.config_flags": {
        "evaluation.tasks.names",
        "mining.memory",
    },
    "cli.export": {
        "cli.argtypes",
        "errors",
    },
    "cli.mteb": {
        "writable",
    },
    "cli.train": {
        "cli.push",
        "errors",
        "training.recipes",
    },
    "cli.train_summary": {
        "evaluation.held_out",
        "evaluation.report",
        "training.output.final_table",
    },
    "data.mix": {
        "data.formats",
    },
    "data.readers": {
        "data.bible",
    },
    "data.sources.cldr": {
        "data.bible",
    },
    "evaluation.cache": {
        "models.encoder",
        "progress",
    },
    "evaluation.config": {
        "models.backends",
    },
    "evaluation.data": {
        "data.bible",
        "data.mix",
        "data.pairs",
        "data.readers",
    },
    "evaluation.formats.bucc": {
        "data.pairs",
    },
    "evaluation.report": {
        "evaluation.tasks.registry",
    },
    "evaluation.run_plots": {
        "evaluation.plots",
    },
    "evaluation.runner": {
        "evaluation.run_plots",
        "models.backends",
        "models.encoder",
    },
    "evaluation.tasks.bucc": {
        "data.bible",
    },
    "evaluation.tasks.geometry": {
        "metrics.geometry",
    },
    "hashing": {
        "resources",
    },
    "integrations.mteb.runner": {
        "models.encoder",
        "models.identity",
    },
    "integrations.sentence_transformers.losses": {
        "objectives.contrastive",
        "objectives.distillation",
        "objectives.mexma",
    },
    "mining.align": {
        "models.backends",
        "models.encoder",
        "progress",
    },
    "mining.encode": {
        "models.backends",
        "progress",
    },
    "mining.filters": {
        "progress",
    },
    "mining.pipeline": {
        "models.backends",
    },
    "mining.pool": {
        "device",
        "mining.devices",
        "models.encoder",
    },
    "mining.score": {
        "data.data_files",
        "data.dataset_rows",
        "data.formats",
        "data.readers",
        "data.sources",
        "models.backends",
    },
    "resources": {
        "data.sources",
        "hub",
        "resources.e5_small",
    },
    "retrieval.knn": {
        "progress",
    },
    "training.auto_batch": {
        "training.setup.factory",
        "training.setup.phases",
    },
    "training.config_checks": {
        "data.apportionment",
    },
    "training.config_file": {
        "config_fields",
    },
    "training.output.card_sections": {
        "data.bible",
        "errors",
        "resources",
        "training.setup.corpora",
    },
    "training.output.folder": {
        "training.batches",
    },
    "training.output.model_card": {
        "data.bible",
        "evaluation.held_out",
        "training",
        "training.config",
        "training.output.final_table",
    },
    "training.output.publish": {
        "training.output.model_card",
    },
    "training.output.run_log": {
        "data.sources",
        "training.setup.corpora",
    },
    "training.regimes": {
        "training.setup.corpora",
    },
    "training.setup.factory": {
        "objectives.bottleneck",
        "objectives.contrastive",
        "objectives.distillation",
        "objectives.mexma",
    },
}


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else TOP


def test_no_import_climbs_up_the_layers() -> None:
    climbs = [
        f"{m} -> {t}" for m, targets in import_graph().items() for t in sorted(targets) if layer(t) > layer(m)
    ]
    assert climbs == []


def deferred_imports() -> dict[str, set[str]]:
    """Module -> the babelspace modules it imports inside a function."""
    known = set(_modules())
    out: dict[str, set[str]] = {}
    for mod, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and not node.level and node.module in known:
                    out.setdefault(mod, set()).add(node.module)
                elif isinstance(node, ast.Import):
                    out.setdefault(mod, set()).update(a.name for a in node.names if a.name in known)
    return {m: t - {m} for m, t in out.items() if t - {m}}  # the package's __init__ names itself


def help_modules() -> set[str]:
    probe = (
        "import argparse, json, sys\nfrom babelspace.cli import build_parser\np = build_parser()\n"
        "sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))\n"
        "[s.format_help() for s in sub.choices.values()]\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('babelspace'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_deferred_imports_only_where_they_keep_help_fast() -> None:
    loaded = help_modules()
    new = []
    for mod, targets in deferred_imports().items():
        unjustified = targets & loaded if mod in loaded else targets
        listed = {f"babelspace.{t}" for t in DEFERRED_UNJUSTIFIED.get(mod.removeprefix("babelspace."), ())}
        new += [f"{mod} -> {t}" for t in sorted(unjustified - listed)]
    assert new == [], "import these at module level: deferring them does not keep --help fast"


def test_the_list_names_only_deferred_imports_that_exist() -> None:
    """A deferred import made module-level leaves the list too (so the list shrinks)."""
    found = {
        m.removeprefix("babelspace."): {t.removeprefix("babelspace.") for t in ts}
        for m, ts in deferred_imports().items()
    }
    stale = [
        f"{m} -> {t}" for m, ts in DEFERRED_UNJUSTIFIED.items() for t in sorted(ts - found.get(m, set()))
    ]
    assert stale == []
