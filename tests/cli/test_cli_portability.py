"""The CLI starts where POSIX-only modules are missing (Windows has neither ``fcntl`` nor
``resource``): issue 32 item 6."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKED = ("fcntl", "resource")

SCRIPT = textwrap.dedent(
    f"""
    import argparse, importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name in {BLOCKED!r}:
                raise ImportError(f"No module named {{name!r}} (blocked by the test)")
            return None

    for name in {BLOCKED!r}:
        sys.modules.pop(name, None)
    sys.meta_path.insert(0, Block())
    from babelspace.cli import build_parser
    import babelspace.training.output.lock  # the output lock: filelock, not fcntl

    parser = build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)][0]
    for name, sub in subs.choices.items():
        assert sub.format_help(), name
    print(len(subs.choices), sorted(m for m in {BLOCKED!r} if m in sys.modules))
    """
)


def test_every_parser_builds_without_fcntl_and_resource() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    count, loaded = proc.stdout.split(maxsplit=1)
    assert int(count) >= 10 and loaded.strip() == "[]"


def test_the_blocker_would_catch_an_import() -> None:
    probe = SCRIPT.replace("from babelspace.cli import build_parser", "import resource")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "blocked by the test" in proc.stderr
