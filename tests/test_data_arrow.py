"""Corpora converted into the memory-mapped Arrow cache: the same pairs, errors and counts as the
readers, reconversion of changed files, dataset columns, and the errors of bad input."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import xxhash

from babelspace.data import text_blocks
from babelspace.data.arrow_corpus import CorpusColumns, CorpusRows, ReadOptions, open_corpus
from babelspace.data.readers import read_aligned, read_hf_dataset, read_tsv
from babelspace.errors import CorpusFormatError, ResourceError

PIECES = ["hello", "world", "  ", "\u00a0", "\x1c", "x\ty", "", "\r", "é", "\u3000", "a b", "de", "zz!", "fr"]


def _random_tsv(rng: random.Random) -> bytes:
    def text() -> str:
        return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 4)))

    rows = []
    for _ in range(rng.randint(1, 25)):
        kind = rng.random()
        if kind < 0.7:
            lang = rng.choice(["de", "fr", "zz!", "de "])
            rows.append(f"{text() or 'a'}\t{text() or 'b'}\ten\t{lang}")
        elif kind < 0.85:
            rows.append(f"{text()}\t{text()}")
        else:
            rows.append(text())
    raw = (rng.choice(["\n", "\r\n"]).join(rows) + rng.choice(["", "\n", "\n\n  \n"])).encode()
    if rng.random() < 0.1:
        raw = b"\xef\xbb\xbf" + raw
    if rng.random() < 0.1:
        raw = raw.replace(b"hello", b"hel\xfflo")
    return raw


def _converted(path: Path, cache: Path, **kw) -> tuple[list, object]:
    corpus = open_corpus(str(path), ReadOptions(**kw), cache)
    return [(p.src, p.tgt, p.src_lang, p.tgt_lang, p.origin) for p in CorpusRows(corpus)], corpus.report


def test_conversion_equals_read_tsv_on_random_files(tmp_path, monkeypatch) -> None:
    """Random TSVs (bad UTF-8, odd whitespace, wrong widths, bad codes, CRLF, BOM, blank tails), in
    blocks as small as a few lines: the converted pairs, origins, read/skip counts and errors are
    read_tsv's, with and without --skip-bad-lines and --tgt-lang."""
    rng = random.Random(0)
    for trial in range(40):
        monkeypatch.setattr(text_blocks, "BLOCK_BYTES", rng.choice([16, 64, 1 << 20]))
        path = tmp_path / f"c{trial}.tsv"
        path.write_bytes(_random_tsv(rng))
        for skip in (False, True):
            for tgt in (None, "de"):
                try:
                    ref = read_tsv(path, skip_bad_lines=skip, tgt_lang=tgt)
                except CorpusFormatError as exc:
                    with pytest.raises(CorpusFormatError) as got:
                        _converted(path, tmp_path / "cache", skip_bad_lines=skip, tgt_lang=tgt)
                    assert (
                        str(got.value).split(" (pass")[0] == str(exc).split(" (pass")[0]
                    )  # hints name flags
                    continue
                pairs, report = _converted(path, tmp_path / "cache", skip_bad_lines=skip, tgt_lang=tgt)
                assert pairs == [(p.src, p.tgt, p.src_lang, p.tgt_lang, p.origin) for p in ref.pairs]
                assert (report.read, report.kept, report.skipped) == (
                    ref.report.read,
                    ref.report.kept,
                    ref.report.skipped,
                )


def test_text_ids_are_xxh3_of_the_text(tmp_path) -> None:
    path = tmp_path / "c.tsv"
    path.write_text("héllo  world\thallo\ten\tde\nfoo\tfoo\ten\tfr\n")
    corpus = open_corpus(str(path), ReadOptions(), tmp_path / "cache")
    expected = [
        [xxhash.xxh3_64_intdigest(t.encode()) for t in pair]
        for pair in [("héllo world", "hallo"), ("foo",) * 2]
    ]
    assert np.asarray(corpus.text_id).tolist() == expected
    assert np.asarray(corpus.src_length).tolist() == [11, 3]
    assert corpus.lang_pairs == [("en", "de"), ("en", "fr")]


def test_changed_file_is_reconverted_never_stale(tmp_path) -> None:
    path = tmp_path / "c.tsv"
    path.write_text("a b\tc d\ten\tde\n")
    first, _ = _converted(path, tmp_path / "cache")
    again, _ = _converted(path, tmp_path / "cache")
    assert again == first
    path.write_text("a b\tc e\ten\tde\n")  # same size, other content
    changed, _ = _converted(path, tmp_path / "cache")
    assert changed[0][1] == "c e"
    assert len(list((tmp_path / "cache" / "corpora").iterdir())) == 2


def test_aligned_files_convert_like_read_aligned(tmp_path) -> None:
    src, tgt = tmp_path / "t.en", tmp_path / "t.de"
    src.write_text("one  two\nthree\n\nfive\n\n")
    tgt.write_text("eins zwei\ndrei\nvier\nfünf\n")
    ref = read_aligned(src, tgt, skip_bad_lines=True)
    pairs, report = _converted(Path(f"{src},{tgt}"), tmp_path / "cache", skip_bad_lines=True)
    assert [p[:4] for p in pairs] == [(p.src, p.tgt, p.src_lang, p.tgt_lang) for p in ref.pairs]
    assert report.skipped == ref.report.skipped == {"empty side": 1}
    tgt.write_text("eins\n")
    with pytest.raises(CorpusFormatError, match="t.de:1: file ends here after 1 lines"):
        _converted(Path(f"{src},{tgt}"), tmp_path / "cache2")


def _save_dataset(path: Path, rows: dict) -> Path:
    import datasets

    datasets.Dataset.from_dict(rows).save_to_disk(str(path))
    return path


def test_dataset_folder_with_english_non_english_columns(tmp_path) -> None:
    folder = _save_dataset(
        tmp_path / "ds", {"english": ["the  cat", "", "a dog"], "non_english": ["die katze", "x", "ein hund"]}
    )
    opts = dict(tgt_lang="de", skip_bad_lines=True, columns=CorpusColumns("english", "non_english"))
    corpus = open_corpus(str(folder), ReadOptions(**opts), tmp_path / "cache")
    ref = read_hf_dataset(folder, "english", "non_english", tgt_lang="de", skip_bad_lines=True)
    got = [(p.src, p.tgt, p.src_lang, p.tgt_lang) for p in CorpusRows(corpus)]
    assert got == [(p.src, p.tgt, p.src_lang, p.tgt_lang) for p in ref.pairs]
    assert corpus.report.skipped == ref.report.skipped == {"empty side": 1}


def test_missing_column_names_the_columns_that_exist(tmp_path) -> None:
    folder = _save_dataset(tmp_path / "ds", {"english": ["a"], "non_english": ["b"]})
    with pytest.raises(CorpusFormatError, match=r"no column 'src'.*columns are \['english', 'non_english'\]"):
        open_corpus(str(folder), ReadOptions(tgt_lang="de"), tmp_path / "cache")


def test_offline_hub_id_is_one_line_naming_hf_hub_offline(tmp_path, monkeypatch) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    with pytest.raises(ResourceError) as exc:
        open_corpus("nobody-here/no-such-corpus", ReadOptions(tgt_lang="de"), tmp_path / "cache")
    message = str(exc.value)
    assert "HF_HUB_OFFLINE" in message and "\n" not in message
    with pytest.raises(ResourceError, match="corpus not found"):  # a missing file is not a Hub id
        open_corpus("data/missing.tsv", ReadOptions(), tmp_path / "cache")


def test_unwritable_or_full_cache_is_refused_before_converting(tmp_path, monkeypatch) -> None:
    path = tmp_path / "c.tsv"
    path.write_text("a\tb\ten\tde\n")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ResourceError, match="cannot write the corpus cache.*--cache-dir"):
        open_corpus(str(path), ReadOptions(), blocker / "cache")
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10, 10, 10))  # type: ignore[attr-defined]
    with pytest.raises(ResourceError, match="GiB free.*--cache-dir"):
        open_corpus(str(path), ReadOptions(), tmp_path / "cache")
    assert not list((tmp_path / "cache" / "corpora").glob("*"))  # nothing half-written
