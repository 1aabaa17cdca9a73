"""``babelspace mine`` input: what the ids default really is, detected ids said in the summary, a
two-column bitext refused instead of read as id = sentence; the printed threshold line says what its
precision number is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from babelspace.cli import build_parser, main
from babelspace.errors import CorpusFormatError
from babelspace.mining.corpus import read_sentences
from babelspace.mining.pipeline import summary_path
from tests.mining.test_mining_mine import SENTENCES, write_lines


def test_help_says_the_ids_default_is_detection(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["mine", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--ids lines")
    ids_help = text[start : text.index("--max-chars MAX_CHARS", start)]
    assert "(default: True)" not in ids_help and "(default: None)" not in ids_help
    assert "--no-ids lines are sentences (tabs are spaces) (default: neither: ids are detected" in ids_help


def test_sentence_like_first_column_is_refused(tmp_path: Path) -> None:
    bitext = write_lines(
        tmp_path / "b.tsv", [f"{s}\tder Satz {i} ist hier" for i, s in enumerate(SENTENCES[:6])]
    )
    with pytest.raises(CorpusFormatError, match="first column looks like sentences.*--no-ids"):
        read_sentences(bitext)
    assert read_sentences(bitext, ids=True).has_ids  # asked for: read as given
    assert not read_sentences(bitext, ids=False).has_ids
    ids = write_lines(tmp_path / "i.tsv", [f"doc-{i}\t{s}" for i, s in enumerate(SENTENCES[:6])])
    f = read_sentences(ids)
    assert f.has_ids and f.ids_detected and not read_sentences(ids, ids=True).ids_detected


def test_detected_ids_are_said_in_summary_and_line(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    src = write_lines(tmp_path / "s.tsv", [f"s{i}\t{t}" for i, t in enumerate(SENTENCES[:12])])
    tgt = write_lines(tmp_path / "t.txt", SENTENCES[:12][::-1])
    out = tmp_path / "p.tsv"
    args = ["mine", "--src", str(src), "--tgt", str(tgt), "--model", str(tiny_model_dir), "--out", str(out)]
    assert main([*args, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads(summary_path(out).read_text())
    assert summary["src"]["ids_detected"] and not summary["tgt"]["ids_detected"]
    assert "src: 12/12 lines kept (ids detected: the first column is read as ids" in printed
    # the threshold line names what its precision number is (a tiny run's: an interval estimate)
    assert "an interval estimate: [" in printed and "estimated precision" not in printed
    assert summary["precision_kind"] == "interval"
