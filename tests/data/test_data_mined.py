"""Mine → train: `babelspace train --data` reads `babelspace mine` output as it is."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from babelspace.cli import main
from babelspace.data.mined import is_mined_file, read_mined
from babelspace.data.readers import load_parallel
from babelspace.errors import CorpusFormatError, TrainingError
from babelspace.training.config import TrainConfig


def _mined(tmp_path: Path, lines: list[str], summary: dict | None = None, name: str = "pairs.tsv") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if summary is not None:
        path.with_name(path.stem + ".summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return path


def test_both_layouts_with_languages_from_the_summary(tmp_path: Path) -> None:
    three = _mined(
        tmp_path, ["1.200000\tHello\tHallo", "1.050000\tYes\tJa"], {"src_lang": "en", "tgt_lang": "de"}
    )
    five = _mined(
        tmp_path, ["1.2\ts7\t3\tGood day\tBonjour"], {"src_lang": "EN", "tgt_lang": "fr"}, name="ids.tsv"
    )
    assert is_mined_file(three) and is_mined_file(five)
    c3 = load_parallel(str(three))
    assert [(p.src, p.tgt, p.src_lang, p.tgt_lang) for p in c3.pairs] == [
        ("Hello", "Hallo", "en", "de"),
        ("Yes", "Ja", "en", "de"),
    ]
    assert c3.pairs[1].origin == f"{three}:2"
    c5 = load_parallel(str(five))
    assert [(p.src, p.tgt, p.src_lang, p.tgt_lang) for p in c5.pairs] == [("Good day", "Bonjour", "en", "fr")]


def test_min_score_keeps_pairs_at_or_above_it_and_counts_the_rest(tmp_path: Path) -> None:
    path = _mined(
        tmp_path, ["1.3\ta\tA", "1.1\tb\tB", "1.05\tc\tC", "0.9\td\tD"], {"src_lang": "en", "tgt_lang": "de"}
    )
    corpus = read_mined(path, min_score=1.05)
    assert [p.src for p in corpus.pairs] == ["a", "b", "c"]
    assert corpus.report.skipped == {"below --min-score": 1} and corpus.report.kept == 3


def test_languages_from_flags_and_contradictions(tmp_path: Path) -> None:
    bare = _mined(tmp_path, ["1.2\tHello\tHallo"], name="bare.tsv")  # no summary next to it
    with pytest.raises(
        CorpusFormatError, match=r"bare.tsv: mined pairs without a target language \(.*--tgt-lang"
    ):
        read_mined(bare)
    assert read_mined(bare, tgt_lang="de").pairs[0].tgt_lang == "de"
    assert read_mined(bare, src_lang="fr", tgt_lang="de").pairs[0].src_lang == "fr"
    summarised = _mined(tmp_path, ["1.2\tHello\tHallo"], {"src_lang": "en", "tgt_lang": "de"})
    assert read_mined(summarised, tgt_lang="de").pairs[0].tgt_lang == "de"  # agreeing flag: fine
    with pytest.raises(
        CorpusFormatError, match=r"--tgt-lang fr contradicts the mining summary .*tgt_lang de"
    ):
        read_mined(summarised, tgt_lang="fr")
    broken = _mined(tmp_path, ["1.2\tHello\tHallo"], name="broken.tsv")
    broken.with_name("broken.summary.json").write_text("{not json")
    with pytest.raises(CorpusFormatError, match=r"broken.summary.json: not a babelspace mine summary"):
        read_mined(broken, tgt_lang="de")


@pytest.mark.parametrize(
    "lines, reason",
    [
        (["1.2\ta\tA", "high\tb\tB"], r":2: bad score \('high' is not a finite number\)"),
        (["1.2\ta\tA", "nan\tb\tB"], r":2: bad score \('nan'"),
        (["1.2\ta\tA", "1.1\tb\tB\tx\ty"], r":2: wrong column count \(5 .*expected 3 as on line 1\)"),
        (["1.2\ta\tA", "1.1\t \tB"], r":2: empty side \(source\)"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, lines: list[str], reason: str) -> None:
    path = _mined(tmp_path, lines, {"src_lang": "en", "tgt_lang": "de"})
    with pytest.raises(CorpusFormatError, match=f"^{path}{reason}"):
        read_mined(path)
    skipped = read_mined(path, skip_bad_lines=True)
    assert len(skipped) == 1 and skipped.report.total_skipped == 1


def test_a_bad_first_score_is_still_read_as_mined_output(tmp_path: Path) -> None:
    """With its summary next to it, a file whose first score is broken is reported as mined output."""
    path = _mined(tmp_path, ["x\ta\tA"], {"src_lang": "en", "tgt_lang": "de"})
    with pytest.raises(CorpusFormatError, match=r":1: bad score"):
        load_parallel(str(path))


def test_min_score_needs_mined_data(tmp_path: Path) -> None:
    tsv = tmp_path / "plain.tsv"
    tsv.write_text("Hello\tHallo\n")
    with pytest.raises(TrainingError, match="--min-score .* no --data corpus is `babelspace mine` output"):
        TrainConfig(data=[str(tsv)], tgt_lang="de", min_score=1.05)
    with pytest.raises(TrainingError, match="--min-score must be a finite number"):
        TrainConfig(data=[str(tsv)], min_score=float("nan"))
    mined = _mined(tmp_path, ["1.2\tHello\tHallo"], {"src_lang": "en", "tgt_lang": "de"})
    assert TrainConfig(data=["bible:1", f"{mined}:0.5"], min_score=1.05).min_score == 1.05


EN = "the a god lord king people land house city day cat dog".split()
DE = "der die gott herr könig volk haus stadt tag katze".split()


def _planted_corpus(tmp_path: Path, n_pairs: int = 170, n_noise: int = 40) -> tuple[Path, Path, set]:
    """Word strings paired with a stand-in translation (the same words and a full stop: what the tiny
    random model can pair), hidden among unpaired lines."""
    rng = random.Random(0)
    src, tgt, seen = [], [], set()
    while len(src) < n_pairs:
        idx = [rng.randrange(len(EN)) for _ in range(rng.randint(3, 6))]
        en = " ".join(EN[i] for i in idx)
        if en not in seen:
            seen.add(en)
            src.append(en)
            tgt.append(en + " .")
    gold = set(zip(src, tgt, strict=True))
    src += [f"{rng.choice(EN)} {rng.choice(EN)} {i} {i}" for i in range(n_noise)]
    tgt += [f"{rng.choice(DE)} {rng.choice(DE)} {i + 500}" for i in range(n_noise)]
    rng.shuffle(src)
    rng.shuffle(tgt)
    (tmp_path / "en.txt").write_text("\n".join(src) + "\n")
    (tmp_path / "de.txt").write_text("\n".join(tgt) + "\n")
    return tmp_path / "en.txt", tmp_path / "de.txt", gold


def test_mine_then_train(tmp_path: Path, tiny_model_dir: Path, tiny_teacher_dir: Path, capsys) -> None:
    """`babelspace mine` a planted corpus, then `babelspace train --data` on its output as it is, with
    the languages from the mining summary and --min-score cutting the weakest pairs."""
    en, de, gold = _planted_corpus(tmp_path)
    mined = tmp_path / "mined.tsv"
    assert main(["mine", "--src", str(en), "--tgt", str(de), "--model", str(tiny_model_dir), "--out", str(mined),
                 "--src-lang", "en", "--tgt-lang", "de", "--threshold", "0", "--no-progress"]) == 0  # fmt: skip
    rows = [line.split("\t") for line in mined.read_text(encoding="utf-8").splitlines()]
    assert len(rows) > 150 and sum((r[1], r[2]) in gold for r in rows) >= 150
    min_score = float(rows[149][0])  # keeps the best 150 (or a few more on a tie)
    capsys.readouterr()
    out = tmp_path / "student"
    assert main(["train", "--data", str(mined), "--min-score", str(min_score), "--teacher", str(tiny_teacher_dir),
                 "--student", str(tiny_model_dir), "--out", str(out), "--batch-size", "8", "--max-steps", "2",
                 "--eval-every", "2", "--dev-pairs", "12", "--max-seq-length", "16",
                 "--projection-fit-pairs", "32", "--cache-dir", str(tmp_path / "cache"), "--test-sentences", "0",
                 "--threads", "1"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    kept = sum(float(r[0]) >= min_score for r in rows)
    below = len(rows) - kept
    assert f"mined.tsv: read {len(rows)}, kept {kept}, skipped {below} (below --min-score {below})" in printed
    assert (out / "model.safetensors").is_file() or any(out.glob("**/model.safetensors"))
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "- de" in card and "- en" in card
