"""Plain-text tables and JSON files for evaluation results."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np


def _cell(value: Any, float_format: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (float, np.floating)):
        return "nan" if math.isnan(value) else format(float(value), float_format)
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def format_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    float_format: str = ".2f",
    title: str | None = None,
) -> str:
    """Fixed-width text table of ``rows`` (dicts); ``columns`` defaults to the keys in first-seen order.

    Numbers are right-aligned (floats with ``float_format``), text left-aligned, missing cells ``-``.
    """
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[_cell(row.get(col), float_format) for col in columns] for row in rows]
    numeric = [any(_is_number(row.get(col)) for row in rows) for col in columns]
    widths = [max([len(col)] + [len(r[j]) for r in cells]) for j, col in enumerate(columns)]

    def fmt(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    lines = []
    if title:
        lines.append(title)
    lines.append(fmt(list(columns)))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(fmt(r) for r in cells)
    return "\n".join(lines)


def to_jsonable(obj: Any) -> Any:
    """Convert dataclasses, numpy values, enums, paths and sets into JSON-compatible values.

    Non-finite floats become ``None`` (JSON has no NaN or infinity).
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k.value if isinstance(k, Enum) else k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, Enum):
        return to_jsonable(obj.value)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj
        return [to_jsonable(v) for v in items]
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` (see :func:`to_jsonable`) as indented UTF-8 JSON, atomically; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(to_jsonable(payload), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
