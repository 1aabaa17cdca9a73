"""Text tables, JSON files and figures."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from babelspace.evaluation.report import format_table, write_json
from babelspace.retrieval.knn import Margin


def test_format_table() -> None:
    rows = [{"lang": "de", "xsim": 1.5, "n": 1012}, {"lang": "swh", "xsim": 12.25}]
    text = format_table(rows, ["lang", "xsim", "n"], title="xsim")
    lines = text.splitlines()
    assert lines[0] == "xsim"
    assert lines[1].split() == ["lang", "xsim", "n"]
    assert set(lines[2].replace(" ", "")) == {"-"}
    assert lines[3].split() == ["de", "1.50", "1012"]
    assert lines[4].split() == ["swh", "12.25", "-"]
    # numbers right-aligned: the decimal points line up
    assert lines[3].index("1.50") + 4 == lines[4].index("12.25") + 5
    assert format_table(rows).splitlines()[0].split() == ["lang", "xsim", "n"]


@dataclass
class _Res:
    f1: float
    margin: Margin


def test_write_json(tmp_path: Path) -> None:
    payload = {
        "res": _Res(np.float32(0.5), Margin.RATIO),
        "arr": np.arange(3),
        "nan": math.nan,
        "path": tmp_path,
        "pairs": {(1, 2), (0, 1)},
    }
    out = write_json(tmp_path / "sub" / "r.json", payload)
    back = json.loads(out.read_text(encoding="utf-8"))
    assert back == {
        "res": {"f1": 0.5, "margin": "ratio"},
        "arr": [0, 1, 2],
        "nan": None,
        "path": str(tmp_path),
        "pairs": [[0, 1], [1, 2]],
    }


def test_plots_write_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from babelspace.evaluation.plots import pca_2d, plot_pca_languages, plot_task_bars

    paths = plot_task_bars({"xsim": {"de": 1.0, "fr": 2.5}, "tatoeba": {"de": 90.0}}, tmp_path / "bars")
    assert [p.name for p in paths] == ["xsim.png", "tatoeba.png"]
    rng = np.random.default_rng(0)
    emb = np.concatenate([rng.standard_normal((30, 8)) + 3, rng.standard_normal((30, 8)) - 3])
    langs = ["en"] * 30 + ["de"] * 30
    scatter = plot_pca_languages(emb, langs, tmp_path / "pca.png", max_points=40)
    for p in [*paths, scatter]:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    proj = pca_2d(emb)
    assert proj.shape == (60, 2)
    assert abs(proj[:30, 0].mean() - proj[30:, 0].mean()) > 5  # the first component separates the groups
