"""Strict JSON everywhere (writable.write_json): no ``NaN``/``Infinity`` in any file babelspace
writes; a non-finite value is written as ``null`` and named under ``"non_finite"``. ``score
--threshold inf`` (and a calibration that reaches no threshold) used to write ``"threshold": Infinity``,
which strict parsers reject."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from babelspace.cli import main
from babelspace.writable import write_json


def _strict(path: Path) -> dict:
    def refuse(token: str) -> float:
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def test_non_finite_values_become_null_and_are_named(tmp_path) -> None:
    path = write_json(
        tmp_path / "s.json", {"threshold": math.inf, "cal": {"low": -math.inf, "xs": [1.0, math.nan]}, "n": 2}
    )
    data = _strict(path)
    assert data["threshold"] is None and data["cal"] == {"low": None, "xs": [1.0, None]} and data["n"] == 2
    assert data["non_finite"] == {"threshold": "Infinity", "cal.low": "-Infinity", "cal.xs[1]": "NaN"}
    assert "non_finite" not in _strict(write_json(tmp_path / "f.json", {"x": 1.5}))


def test_a_list_holding_a_non_finite_value_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"non-finite values at \[0\]"):
        write_json(tmp_path / "l.json", [math.inf])
    assert not (tmp_path / "l.json").exists()


def test_score_refuses_an_infinite_threshold_and_writes_strict_json(tmp_path, tiny_model_dir, capsys) -> None:
    bitext = tmp_path / "p.tsv"
    bitext.write_text("a house\tein Haus\na tree\tein Baum\nthe sun\tdie Sonne\n")
    out = tmp_path / "k.tsv"
    argv = ["score", str(bitext), "--model", str(tiny_model_dir), "--out", str(out), "--tgt-lang", "de"]
    with pytest.raises(SystemExit) as exc:  # refused when parsed, before any work
        main([*argv, "--threshold", "inf", "--no-progress"])
    assert exc.value.code == 2 and "finite" in capsys.readouterr().err
    assert not out.exists()
    assert main([*argv, "--threshold", "1e9", "--no-progress"]) == 0
    summary = _strict(tmp_path / "k.summary.json")
    assert summary["threshold"] == 1e9 and summary["kept"] == 0 and "non_finite" not in summary
