"""One helper quotes an exception's cause in a one-line error: :func:`babelspace.errors.first_error_line`."""

from __future__ import annotations

import ast
from pathlib import Path

from babelspace.errors import first_error_line

PKG = Path(__file__).resolve().parents[2] / "src" / "babelspace"


def test_first_line_capped_or_the_type_name() -> None:
    assert first_error_line(ValueError("  bad value\nsecond line")) == "bad value"
    assert first_error_line(OSError("x" * 500)) == "x" * 300
    assert first_error_line(KeyError()) == "KeyError"
    assert first_error_line(ValueError("bad\nmore"), with_type=True) == "ValueError: bad"
    assert first_error_line(RuntimeError(""), with_type=True) == "RuntimeError"


def test_no_module_writes_its_own() -> None:
    """Neither a private ``_first_line`` nor an inline ``str(exc)...splitlines()[0]`` outside errors.py."""
    own = []
    for path in PKG.rglob("*.py"):
        if path.name == "errors.py":
            continue
        text = path.read_text(encoding="utf-8")
        defs = [n.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)]
        if "_first_line" in defs or "str(exc).strip().splitlines()[0]" in text:
            own.append(str(path.relative_to(PKG)))
    assert own == []
