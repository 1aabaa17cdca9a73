"""The path of one ``run(cfg)`` through babelspace's modules: how often it changes package, climbs
back up the layers and returns to a module it had left.

A tiny run (two tiny random 32-d BERT models built here, the offline Bible's German and French, 2 steps,
the held-out table of 20 verses) is traced with ``sys.setprofile``. Every call from one babelspace
module into another is an *edge* (caller module -> callee module); a loop that makes the same call
again adds nothing, so the figures count the shape of the path, not the number of steps. The path
is the sequence of edges in the order they are first taken. Printed:

- files entered: babelspace modules the path enters;
- moves between packages: edges whose caller and callee are in different packages;
- climbs: edges from a lower layer to a higher one (the layers of tests/project/test_project_layout_layers.py, low
  to high: shared utilities, data, resources and hashing, models and retrieval, metrics, evaluation
  and objectives, mining, training, integrations, cli, api); at run time these are callbacks (a
  function or object handed down and called from below), since no import climbs;
- revisits: edges into a module the path had entered before and left since (the caller is
  another module) — a module the walk comes back to.
- cfg walk: the same figures over the calls that receive the run's ``TrainConfig`` (the issue's
  "walk of one run's config").

Run: ``HF_HUB_OFFLINE=1 python bench/trace_run.py`` (``--edges`` lists them, ``--table`` prints the
run's held-out table, the same on CPU from run to run; ``--imports`` prints the import graph's
figures instead: imports inside functions, and imports that climb a layer).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the tests' layer rules are imported from the repository
sys.path.insert(0, str(ROOT))
from tests.project.test_project_layout import import_graph  # noqa: E402
from tests.project.test_project_layout_layers import DEFERRED_UNJUSTIFIED, LAYERS, deferred_imports, layer  # noqa: E402 - one definition


def _module(filename: str, root: str) -> str | None:
    if not filename.startswith(root):
        return None
    rel = Path(filename[len(root) :].lstrip("/")).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts) or "__init__"


def _package(module: str) -> str:
    head = module.split(".")[0]
    return head if head in LAYERS else ""


def _figures(edges: list[tuple[str, str]]) -> dict[str, int]:
    entered: list[str] = []
    seen: set[str] = set()
    revisits = 0
    for caller, callee in edges:
        if callee in seen and callee != caller:
            revisits += 1
        seen.update((caller, callee))
        entered.extend(m for m in (caller, callee) if m not in entered)
    return {
        "files entered": len(entered),
        "moves between packages": sum(_package(a) != _package(b) for a, b in edges),
        "climbs up the layers": sum(LAYERS[_package(b)] > LAYERS[_package(a)] for a, b in edges),
        "revisits": revisits,
    }


def trace(work: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[dict] | None]:
    """(every cross-module edge, the edges of calls that receive the run's config), in first-taken
    order, and the run's held-out table."""
    import babelspace
    from babelspace.cli import build_parser
    from babelspace.cli.train import config_from_args
    from babelspace.training.run import run

    spec = importlib.util.spec_from_file_location(
        "conftest", Path(__file__).parents[1] / "tests" / "conftest.py"
    )
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    teacher = conftest._build_tiny(
        work / "teacher", seed=1
    )  # the width of the student: the table compares them
    student = conftest._build_tiny(work / "student")
    flags = ["--data", "bible", "--langs", "de,fr", "--teacher", str(teacher), "--student", str(student),
             "--out", str(work / "out"), "--batch-size", "8", "--max-steps", "2", "--eval-every", "2",
             "--dev-pairs", "16", "--max-seq-length", "16", "--projection-fit-pairs", "32",
             "--cache-dir", str(work / "cache"), "--test-sentences", "20", "--threads", "1"]  # fmt: skip
    cfg = config_from_args(build_parser().parse_args(["train", *flags]))
    root = str(Path(babelspace.__file__).parent)
    edges: dict[tuple[str, str], None] = {}
    cfg_edges: dict[tuple[str, str], None] = {}

    def profile(frame, event, arg) -> None:  # noqa: ANN001
        if event != "call":
            return
        callee = _module(frame.f_code.co_filename, root)
        caller_frame = frame.f_back
        if callee is None or caller_frame is None:
            return
        caller = _module(caller_frame.f_code.co_filename, root)
        if caller is None or caller == callee:
            return
        edges.setdefault((caller, callee), None)
        if any(v is cfg for v in frame.f_locals.values()):
            cfg_edges.setdefault((caller, callee), None)

    sys.setprofile(profile)
    try:
        result = run(cfg)
    finally:
        sys.setprofile(None)
    return list(edges), list(cfg_edges), result.table


def import_figures() -> str:
    """The import graph's figures (module -> module pairs, function-level imports included)."""
    graph = import_graph()
    pairs = sum(map(len, graph.values()))
    deferred = sum(map(len, deferred_imports().values()))
    climbs = sum(layer(t) > layer(m) for m, ts in graph.items() for t in ts)
    listed = sum(map(len, DEFERRED_UNJUSTIFIED.values()))
    return (
        f"imports: {len(graph)} modules, {pairs} module->module imports, {deferred} of them only inside "
        f"functions ({listed} of those not needed by --help, listed in tests/project/test_project_layout_layers.py), "
        f"{climbs} climbing up the layers"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edges", action="store_true", help="list every edge, marking climbs")
    ap.add_argument(
        "--table", action="store_true", help="print the run's held-out table (JSON, one row a line)"
    )
    ap.add_argument("--imports", action="store_true", help="print the import graph's figures only (no run)")
    args = ap.parse_args()
    if args.imports:
        print(import_figures())
        return
    with tempfile.TemporaryDirectory() as tmp:
        edges, cfg_edges, table = trace(Path(tmp))
    if args.table:
        for row in table or []:
            print(json.dumps(row, sort_keys=True))
    for name, path in (("whole path", edges), ("cfg walk", cfg_edges)):
        print(f"{name}: {len(path)} edges; " + ", ".join(f"{k} {v}" for k, v in _figures(path).items()))
    if args.edges:
        for a, b in edges:
            up = " (climb)" if LAYERS[_package(b)] > LAYERS[_package(a)] else ""
            print(f"  {a} -> {b}{up}")


if __name__ == "__main__":
    main()
