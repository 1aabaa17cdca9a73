"""Mined, scored and aligned files train as they are: the threshold in the file's summary applies,
``--min-score`` is an extra cut, and ``babelspace score``'s 7-column rows carry their languages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from babelspace.data.mined import is_mined_file, read_mined
from babelspace.data.readers import load_parallel
from babelspace.errors import CorpusFormatError


def _file(tmp_path: Path, lines: list[str], summary: dict | None, name: str = "pairs.tsv") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if summary is not None:
        path.with_name(path.stem + ".summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return path


def test_the_summarys_threshold_applies_and_min_score_cuts_further(tmp_path: Path) -> None:
    lines = ["1.300000\ta\tA", "1.018300\tb\tB", "1.018299\tc\tC", "0.990000\td\tD"]
    path = _file(tmp_path, lines, {"src_lang": "en", "tgt_lang": "de", "threshold": 1.0183004})
    corpus = read_mined(path)
    assert [p.src for p in corpus.pairs] == ["a", "b"]  # 1.018300 is the threshold written to 6 decimals
    assert corpus.report.skipped == {"below the summary's threshold": 2}
    cut = read_mined(path, min_score=1.2)
    assert [p.src for p in cut.pairs] == ["a"]
    assert cut.report.skipped == {"below the summary's threshold": 2, "below --min-score": 1}
    # no threshold (align's summary), or none that is a number: every row trains
    for summary in ({"src_lang": "en", "tgt_lang": "de"}, {"tgt_lang": "de", "threshold": None}):
        path = _file(tmp_path, lines, summary, name="aligned.tsv")
        assert len(read_mined(path)) == 4


def test_seven_columns_carry_each_rows_languages(tmp_path: Path) -> None:
    lines = ["1.2\tb.tsv:1\tb.tsv:1\tHello\tHallo\ten\tde", "1.1\tb.tsv:2\tb.tsv:2\tYes\tOui\ten\tfr"]
    path = _file(tmp_path, lines, {"src_lang": None, "tgt_lang": None, "threshold": 1.0})
    assert is_mined_file(path)
    corpus = load_parallel(str(path))
    assert [(p.src, p.tgt, p.src_lang, p.tgt_lang) for p in corpus.pairs] == [
        ("Hello", "Hallo", "en", "de"),
        ("Yes", "Oui", "en", "fr"),
    ]
    bad = _file(tmp_path, ["1.2\tx\tx\tHello\tHallo\ten\tnot a code"], None, name="bad.tsv")
    with pytest.raises(CorpusFormatError, match="bad.tsv:1: unknown language code"):
        read_mined(bad)
    assert read_mined(bad, skip_bad_lines=True).report.skipped == {"unknown language code": 1}
