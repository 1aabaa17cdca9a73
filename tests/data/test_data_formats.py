"""``--data`` formats: JSON Lines/JSON, CSV and Parquet through ``datasets`` into the Arrow cache, the
columns they are read by (sentence-transformers' included), their FILE:N errors, one reader shared by
training and evaluation, the ``aligned:SRC+TGT`` pair syntax, and the one ``--data`` parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from babelspace.data import mix
from babelspace.data.arrow_corpus import CorpusRows, ReadOptions, open_corpus
from babelspace.data.dataset_rows import CorpusColumns
from babelspace.data.mix import DataMixError, parse_data_items, parse_data_mix
from babelspace.data.readers import load_parallel, read_data_files
from babelspace.errors import CorpusFormatError, TrainingError
from babelspace.training.config import TrainConfig
from babelspace.training.setup.corpora import data_mix, load_corpora
from tests.training.test_training_trainer import write_corpus


def _rows(tsv: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t")) for line in tsv.read_text().splitlines()]  # type: ignore[misc]


def _write(path: Path, rows: list[dict]) -> Path:
    """``rows`` as a JSON Lines, JSON, CSV or Parquet file (by the suffix of ``path``)."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    elif path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path


def _pairs(corpus) -> list[tuple[str, str, str, str]]:
    return [(p.src, p.tgt, p.src_lang, p.tgt_lang) for p in corpus]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_data_files_build_the_training_corpus_as_the_tsv_does(tmp_path, suffix) -> None:
    """The same 300 pairs as TSV and as a data file (sentence-transformers' column names): the
    training corpus built through training/setup/corpora.py holds the same train and dev pairs."""
    tsv = write_corpus(tmp_path / "p.tsv", n=300)
    rows = [{"english": en, "non_english": de} for en, de in _rows(tsv)]
    other = _write(tmp_path / f"p{suffix}", rows)
    built = {}
    for path in (tsv, other):
        cfg = TrainConfig(data=[str(path)], tgt_lang="de", dev_pairs=20, cache_dir=tmp_path / "cache")
        train, dev = load_corpora(cfg)
        built[path.suffix] = (sorted(_pairs(train.pairs)), sorted(_pairs(dev.pairs)))
        assert train.report.read == 300 and train.report.kept == 300
    assert built[suffix] == built[".tsv"]
    assert len(built[suffix][1]) == 20
    corpus = open_corpus(str(other), ReadOptions(tgt_lang="de"), tmp_path / "cache")
    first = next(iter(CorpusRows(corpus)))
    assert first.origin == f"{other}:1" and (first.src, first.tgt) == _rows(tsv)[0]


def test_a_changed_data_file_is_read_again(tmp_path) -> None:
    path = _write(tmp_path / "p.jsonl", [{"src": "a b", "tgt": "c d"}])
    opts = ReadOptions(tgt_lang="de")
    assert [p.tgt for p in CorpusRows(open_corpus(str(path), opts, tmp_path / "cache"))] == ["c d"]
    _write(path, [{"src": "a b", "tgt": "e f"}])  # same size, other content
    assert [p.tgt for p in CorpusRows(open_corpus(str(path), opts, tmp_path / "cache"))] == ["e f"]


def test_language_columns_and_csv_fields_read_as_text(tmp_path) -> None:
    """``src_lang``/``tgt_lang`` columns give each row's languages (as a TSV's columns 3 and 4 do);
    CSV fields stay text (``2019`` is not a number); the eval reader reads what training reads."""
    rows = [
        {"src": "2019", "tgt": "zweitausendneunzehn", "src_lang": "en", "tgt_lang": "de"},
        {"src": "NA", "tgt": "n. v.", "src_lang": "en", "tgt_lang": "fr"},
    ]
    for suffix in (".csv", ".jsonl", ".parquet"):
        path = _write(tmp_path / f"l{suffix}", rows)
        want = [("2019", "zweitausendneunzehn", "en", "de"), ("NA", "n. v.", "en", "fr")]
        assert _pairs(read_data_files(path)) == want
        assert _pairs(CorpusRows(open_corpus(str(path), ReadOptions(), tmp_path / "cache"))) == want
        assert _pairs(load_parallel(str(path), split="test")) == want


def test_a_missing_column_names_the_file_and_the_columns_found(tmp_path) -> None:
    path = _write(tmp_path / "x.jsonl", [{"en": "a", "de": "b"}])
    with pytest.raises(CorpusFormatError) as exc:
        open_corpus(str(path), ReadOptions(tgt_lang="de"), tmp_path / "cache")
    assert str(exc.value).startswith(f"{path}: no column 'src' (columns are ['en', 'de']; pass --src-col")
    cols = ReadOptions(tgt_lang="de", columns=CorpusColumns("en", "de"))
    assert [p.tgt for p in CorpusRows(open_corpus(str(path), cols, tmp_path / "cache"))] == ["b"]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_bad_rows_name_file_and_record_or_are_counted(tmp_path, suffix) -> None:
    rows = [{"src": "a", "tgt": "b"}, {"src": " ", "tgt": "c"}, {"src": "d", "tgt": "e"}]
    path = _write(tmp_path / f"bad{suffix}", rows)
    for read in (
        lambda **kw: read_data_files(path, tgt_lang="de", **kw),
        lambda **kw: open_corpus(str(path), ReadOptions(tgt_lang="de", **kw), tmp_path / "cache"),
    ):
        with pytest.raises(CorpusFormatError, match=rf"^{path}:2: empty side \(source\)$"):
            read()
        corpus = read(skip_bad_lines=True)
        assert corpus.report.skipped == {"empty side": 1} and corpus.report.kept == 2
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"src": "a", "tgt": "b"}\n{"src": \n')
    with pytest.raises(CorpusFormatError, match=rf"^{broken}: datasets cannot read it as JSON") as exc:
        open_corpus(str(broken), ReadOptions(tgt_lang="de", skip_bad_lines=True), tmp_path / "cache")
    assert "\n" not in str(exc.value)


def test_a_folder_of_data_files_and_its_splits(tmp_path, caplog) -> None:
    folder = tmp_path / "en-de"
    folder.mkdir()
    _write(folder / "train-00000-of-00002.parquet", [{"english": "a", "non_english": "b"}])
    _write(folder / "train-00001-of-00002.parquet", [{"english": "c", "non_english": "d"}])
    _write(folder / "dev-00000-of-00001.parquet", [{"english": "e", "non_english": "f"}])
    corpus = open_corpus(str(folder), ReadOptions(tgt_lang="de"), tmp_path / "cache")
    assert [(p.src, p.origin) for p in CorpusRows(corpus)] == [("a", f"{folder}:1"), ("c", f"{folder}:2")]
    dev = open_corpus(str(folder), ReadOptions(tgt_lang="de", split="validation"), tmp_path / "cache")
    assert [p.tgt for p in CorpusRows(dev)] == ["f"]
    with pytest.raises(
        CorpusFormatError, match=r"no split 'dev' among its files \(splits are train, validation"
    ):
        open_corpus(str(folder), ReadOptions(tgt_lang="de", split="dev"), tmp_path / "cache")
    _write(folder / "extra.parquet", [{"english": "g", "non_english": "h"}])
    with caplog.at_level("WARNING", logger="babelspace.data"):
        open_corpus(str(folder), ReadOptions(tgt_lang="de"), tmp_path / "cache")
    assert "1 data files are in no split and are not read (extra.parquet)" in caplog.text
    (folder / "train-notes.txt").write_text("x\n")
    with pytest.raises(CorpusFormatError, match=r"mixes files of several kinds \(.parquet, .txt\)"):
        open_corpus(str(folder), ReadOptions(tgt_lang="de"), tmp_path / "cache")


# ---------------------------------------------------------------------------------- aligned pairs
def test_aligned_syntax_pairs_line_i_with_line_i(tmp_path, monkeypatch) -> None:
    """``aligned:SRC+TGT[:WEIGHT]``: paths may hold '+', ':' and ','; line i pairs with line i, in
    training (the Arrow cache) and in evaluation alike."""
    folder = tmp_path / "c++, v:2"
    folder.mkdir()
    src, tgt = folder / "t.en", folder / "t.de"
    src.write_text("one\ntwo\nthree\n")
    tgt.write_text("eins\nzwei\ndrei\n")
    spec = f"aligned:{src}+{tgt}"
    assert parse_data_items([f"{spec}:0.5"]) == [mix.DataItem(spec, 0.5, (src, tgt))]
    monkeypatch.chdir(folder)
    assert parse_data_mix("aligned:t.en+t.de:2,bible") == [("aligned:t.en+t.de", 2.0), ("bible", 1.0)]
    corpus = open_corpus(spec, ReadOptions(), tmp_path / "cache")
    want = [("one", "eins", "en", "de"), ("two", "zwei", "en", "de"), ("three", "drei", "en", "de")]
    assert _pairs(CorpusRows(corpus)) == _pairs(load_parallel(spec)) == want
    assert [p.origin for p in CorpusRows(corpus)][-1] == f"{spec}:3"
    assert mix.source_of(next(iter(CorpusRows(corpus)))) == spec  # its weight reaches the sampler


def test_the_old_comma_form_of_two_text_files_says_how_to_write_it(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.en").write_text("hello\n")
    Path("a.de").write_text("hallo\n")
    for value in ("a.en,a.de", "a.en,nonexist.de"):
        with pytest.raises(TrainingError) as exc:
            data_mix([value])
        pair = value.replace(",", "+")
        assert str(exc.value) == (
            f"--data: {value!r}: a comma separates the corpora of a mix, and a.en is a plain-text file "
            f"(no tab on its first line: one sentence per line), not a corpus; two line-aligned files go "
            f"as 'aligned:{pair}'"
        )
    with pytest.raises(TrainingError, match=r"^--data: a.en: not a TSV file .*'aligned:SRC_FILE\+TGT_FILE'"):
        data_mix(["a.en"])
    write_corpus(Path("a.tsv"), n=5)
    write_corpus(Path("b.tsv"), n=5, seed=1)
    assert data_mix(["a.tsv,b.tsv:0.5"]) == [("a.tsv", 1.0), ("b.tsv", 0.5)]  # a mix stays a mix
    assert data_mix(["a.tsv,cldr:0.5"]) == [("a.tsv", 1.0), ("cldr", 0.5)]


@pytest.mark.parametrize("missing_first", [False, True])
def test_aligned_files_with_one_missing_name_it(tmp_path, monkeypatch, missing_first) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.en").write_text("hello\n")
    item = "aligned:nonexist.de+a.en" if missing_first else "aligned:a.en+nonexist.de"
    with pytest.raises(TrainingError) as exc:
        data_mix([item])
    assert str(exc.value) == (
        f"--data: {item!r}: nonexist.de does not exist (two line-aligned files go as 'aligned:SRC_FILE+TGT_FILE')"
    )


def test_a_plus_that_splits_two_ways_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("a", "a+b", "b+c", "c"):
        Path(name).write_text("x\n")
    with pytest.raises(
        DataMixError, match=r"splits at a '\+' into two existing files in 2 ways \(a \+ b\+c; a\+b \+ c\)"
    ):
        parse_data_items(["aligned:a+b+c"])


# ---------------------------------------------------------------------------------- one parser
def test_every_reader_of_data_resolves_it_through_the_one_parser(tmp_path, monkeypatch) -> None:
    """Training's mix, the config's checks, the Arrow cache, the evaluation data, the readers and the
    output-safety check all split a ``--data`` value in `babelspace.data.mix` (nowhere else)."""
    from babelspace.evaluation.config import EvalConfig
    from babelspace.evaluation.data import load_eval_data
    from babelspace.training.output.folder import check_output_apart_from_inputs

    tsv = write_corpus(tmp_path / "p.tsv", n=5)
    seen: list[str] = []
    split = mix._split

    def spy(value: str) -> list[str]:
        seen.append(value)
        return split(value)

    monkeypatch.setattr(mix, "_split", spy)
    calls = {
        "training": lambda: data_mix([f"{tsv}:2"]),
        "config": lambda: TrainConfig(data=[f"{tsv}"], min_score=1.0),
        "cache": lambda: open_corpus(str(tsv), ReadOptions(tgt_lang="de"), tmp_path / "cache"),
        "eval": lambda: load_eval_data(EvalConfig(model="m", data=[str(tsv)], tgt_lang="de")),
        "readers": lambda: load_parallel(str(tsv), tgt_lang="de"),
        "outputs": lambda: check_output_apart_from_inputs(
            TrainConfig(data=[str(tsv)], output=tmp_path / "o")
        ),
    }
    for name, call in calls.items():
        seen.clear()
        try:
            call()
        except TrainingError:  # the config refuses --min-score without mined data, after parsing it
            pass
        assert seen, f"{name} read --data without babelspace.data.mix"


def test_train_runs_on_a_jsonl_file_with_sentence_transformers_columns(
    tmp_path, tiny_teacher_dir, tiny_model_dir, capsys
) -> None:
    """``babelspace train --data pairs.jsonl`` (english/non_english rows): a tiny run trains, exports
    and logs the corpus as given."""
    from babelspace.cli import main

    tsv = write_corpus(tmp_path / "p.tsv", n=200)
    data = _write(tmp_path / "pairs.jsonl", [{"english": en, "non_english": de} for en, de in _rows(tsv)])
    out = tmp_path / "out"
    args = ["train", "--data", str(data), "--tgt-lang", "de", "--teacher", str(tiny_teacher_dir),
            "--student", str(tiny_model_dir), "--out", str(out), "--batch-size", "4", "--max-steps", "2",
            "--eval-every", "2", "--max-seq-length", "16", "--projection-fit-pairs", "32",
            "--cache-dir", str(tmp_path / "cache"), "--test-sentences", "0", "--threads", "1"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    assert (out / "model.safetensors").is_file()
    log = json.loads((out / "babelspace_training.json").read_text())
    assert log["config"]["data"] == [str(data)]
