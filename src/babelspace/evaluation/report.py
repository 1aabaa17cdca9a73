"""Plain-text tables and JSON files for evaluation results."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.evaluation.tasks.geometry import PER_LANGUAGE_KEYS
from babelspace.writable import write_json as _write_json


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
    return _write_json(path, to_jsonable(payload))


# --------------------------------------------------------------------------- the terminal report of a run

#: Tasks with one row per language: they share the main table.
LANG_TASKS = ("xsim", "xsimpp", "tatoeba", "bucc", "mse")


def _ok(tasks: Mapping[str, Any], name: str) -> Any | None:
    r = tasks.get(name)
    return r if r is not None and r.status == "ok" else None


def _main_columns(tasks: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(header, task, key) of the main table's columns."""
    from babelspace.evaluation.tasks.registry import TASKS

    columns: list[tuple[str, str, str]] = []
    for name in LANG_TASKS:
        r = _ok(tasks, name)
        if r is None:
            continue
        columns.append((TASKS[name].column, name, r.metric))
        if name == "xsim" and r.config.get("direction") == "both":
            columns.append(("xsim en->xx err%", name, "en2xx_error_rate"))
    return columns


def _main_table(tasks: Mapping[str, Any]) -> list[str]:
    """The per-language table of every language task's main metric, with its notes."""
    columns = _main_columns(tasks)
    if not columns:
        return []
    langs: list[str] = []
    for _, name, _ in columns:
        langs.extend(lang for lang in tasks[name].per_language if lang not in langs and lang != "en")
    if any("en" in tasks[name].per_language for _, name, _ in columns):
        langs.append("en")
    rows = [
        {"lang": lang, **{h: tasks[name].per_language.get(lang, {}).get(key) for h, name, key in columns}}
        for lang in langs
    ]
    rows.append({"lang": "avg", **{h: tasks[name].average.get(key) for h, name, key in columns}})
    out = ["", format_table(rows, columns=["lang", *(c[0] for c in columns)])]
    out.append("avg: micro-average (pooled errors) for xsim and xsim++, mean over languages otherwise")
    if _ok(tasks, "mse"):
        out.append("mse row 'en': student(English) vs teacher(English), not in the average")
    if (x := _ok(tasks, "xsim")) is not None:
        c = x.config
        out.append(f"xsim: margin {c['margin']}, k={c['k']}, direction {c['direction']}")
    return out


def _geometry_table(r: Any) -> list[str]:
    keys = PER_LANGUAGE_KEYS
    rows = [{"lang": lang, **{k: v.get(k) for k in keys}} for lang, v in r.per_language.items()]
    rows.append({"lang": "avg", **{k: r.average.get(k) for k in keys}})
    title = f"geometry (language share of the variance: {r.average.get('language_share'):.3f}):"
    return ["", format_table(rows, columns=["lang", *keys], title=title)]


def _xsimpp_table(r: Any) -> list[str]:
    types = list(r.average.get("error_rate_by_type", {}))
    rows = [
        {"lang": lang, **{t: v["error_rate_by_type"].get(t) for t in types}, "total": v["error_rate"]}
        for lang, v in r.per_language.items()
    ]
    rows.append({"lang": "avg", **r.average["error_rate_by_type"], "total": r.average["error_rate"]})
    title = "xsim++ error % by winning negative type:"
    return [
        "",
        format_table(rows, columns=["lang", *types, "total"], title=title),
        f"negatives: {r.config.get('negatives')}",
    ]


def _tatoeba_table(r: Any) -> list[str]:
    def row(lang: str, v: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "lang": lang,
            "xx->en": v["xx2en_accuracy"],
            "en->xx": v["en2xx_accuracy"],
            "mean": v["mean_accuracy"],
        }

    rows = [row(lang, v) for lang, v in r.per_language.items()] + [row("avg", r.average)]
    return ["", format_table(rows, title="tatoeba accuracy % (cosine top-1):")]


def _bucc_table(r: Any) -> list[str]:
    keys = {"P": "precision", "R": "recall", "F1": "f1", "train F1": "train_f1", "threshold": "threshold"}
    rows = [{"lang": lang, **{h: v[k] for h, k in keys.items()}} for lang, v in r.per_language.items()]
    title = "bucc (threshold tuned on training, applied to test):"
    return ["", format_table(rows, title=title), f"data: {r.config.get('data')}"]


def _sts_table(r: Any) -> list[str]:
    rows = [{"set": k, "spearman": v["spearman"], "n": v["n"]} for k, v in r.per_language.items()]
    rows.append({"set": "mean", "spearman": r.average["spearman"]})
    return ["", format_table(rows, title="sts Spearman x 100:")]


def _bias_table(r: Any) -> list[str]:
    rows = [{"set": k, "spearman": v["spearman"], "n": v["n"]} for k, v in r.per_language.items()]
    a = r.average
    return [
        "",
        format_table(rows, title="language bias (Spearman x 100):"),
        f"mean of sets {a['mean_per_set']:.2f}, joined {a['joined']:.2f}, drop {a['drop']:.2f} "
        "(positive drop: scores depend on the language pair)",
    ]


#: The detail tables after the main table, in print order.
_DETAIL_TABLES = (
    ("geometry", _geometry_table),
    ("xsimpp", _xsimpp_table),
    ("tatoeba", _tatoeba_table),
    ("bucc", _bucc_table),
    ("sts", _sts_table),
    ("bias", _bias_table),
)


def _closing_lines(report: Any) -> list[str]:
    """Skipped tasks, notes and timings."""
    tasks = report.tasks
    notes = [n for r in tasks.values() for n in r.notes]
    skipped = [(name, r.reason) for name, r in tasks.items() if r.status != "ok"]
    out = [""] if skipped or notes else []
    out += [f"{name}: SKIPPED - {reason}" for name, reason in skipped]
    out += [f"note: {n}" for n in notes]
    timing = ", ".join(
        f"{name} {r.wall_time_s:.1f}s (encode {r.encode_time_s:.1f}s)" for name, r in tasks.items()
    )
    student = report.encoding.get("student") or {}
    out += [
        "",
        f"time: {timing}; total {report.wall_time_s:.1f}s; "
        f"{student.get('texts_encoded', 0)} distinct texts encoded by the model",
    ]
    return out


def format_report(report: Any) -> str:
    """The terminal summary of an :class:`~babelspace.evaluation.results.EvalReport`: per-language
    table, details per task, skipped tasks and timings."""
    out: list[str] = [f"model: {report.model}"]
    if report.data:
        out.append(f"data: {report.data.get('description', '')}")
    out += _main_table(report.tasks)
    for name, table in _DETAIL_TABLES:
        if (r := _ok(report.tasks, name)) is not None:
            out += table(r)
    out += _closing_lines(report)
    return "\n".join(out)
