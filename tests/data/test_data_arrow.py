"""Corpora converted into the memory-mapped Arrow cache: the same pairs, errors and counts as the
readers, reconversion of changed files, dataset columns, and the errors of bad input."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import xxhash

from babelspace.data import text_blocks
from babelspace.data.arrow_corpus import CorpusRows, ReadOptions, open_corpus
from babelspace.data.dataset_rows import CorpusColumns
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
    pairs, report = _converted(Path(f"aligned:{src}+{tgt}"), tmp_path / "cache", skip_bad_lines=True)
    assert [p[:4] for p in pairs] == [(p.src, p.tgt, p.src_lang, p.tgt_lang) for p in ref.pairs]
    assert report.skipped == ref.report.skipped == {"empty side": 1}
    tgt.write_text("eins\n")
    with pytest.raises(CorpusFormatError, match="t.de:1: file ends here after 1 lines"):
        _converted(Path(f"aligned:{src}+{tgt}"), tmp_path / "cache2")


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
    folder = _save_dataset(tmp_path / "ds", {"en": ["a"], "de": ["b"]})
    with pytest.raises(CorpusFormatError, match=r"ds: no column 'src'.*columns are \['en', 'de'\]"):
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
    with pytest.raises(
        ResourceError, match=r"has 0.0 MiB free; converting this corpus needs about 1.0 MiB.*--cache-dir"
    ):
        open_corpus(str(path), ReadOptions(), tmp_path / "cache")
    assert not list((tmp_path / "cache" / "corpora").glob("*"))  # nothing half-written


@pytest.mark.parametrize(("n_src", "n_tgt"), [(300, 299), (300, 298), (299, 300), (298, 300), (3, 0), (0, 2)])
def test_aligned_files_of_other_lengths_name_both_counts(tmp_path, n_src, n_tgt) -> None:
    """Any difference in line count is one error naming both true counts: the Arrow reader (which
    training uses) and read_aligned (which evaluation uses) alike, whichever file is longer."""
    src, tgt = tmp_path / "a.en", tmp_path / "b.de"
    src.write_text("".join(f"source {i}\n" for i in range(n_src)))
    tgt.write_text("".join(f"ziel {i}\n" for i in range(n_tgt)))
    short, long_ = (tgt, src) if n_tgt < n_src else (src, tgt)
    n_short, n_long = sorted((n_src, n_tgt))
    said = (
        f"file ends here after {n_short} lines, but {long_} has {n_long}"
        if n_short
        else f"file is empty, but {long_} has {n_long} lines"
    )
    for read in (
        lambda: open_corpus(f"aligned:{src}+{tgt}", ReadOptions(), tmp_path / "cache"),
        lambda: read_aligned(src, tgt),
    ):
        with pytest.raises(CorpusFormatError) as exc:
            read()
        assert str(exc.value).startswith(f"{short}") and said in str(exc.value)
        assert "\n" not in str(exc.value)


def _damage_meta_rows(folder: Path) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    meta["rows"] = meta["report"]["kept"] = 150
    (folder / "meta.json").write_text(json.dumps(meta))


def _truncate(name: str, keep: int):
    def damage(folder: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: len(data) - keep] if keep else b"")

    return damage


def _junk(name: str):
    def damage(folder: Path) -> None:
        (folder / name).write_bytes(random.Random(0).randbytes((folder / name).stat().st_size))

    return damage


DAMAGES = {
    "meta.json rows edited": _damage_meta_rows,
    "meta.json junk": _junk("meta.json"),
    "meta.json deleted": lambda folder: (folder / "meta.json").unlink(),
    "pairs.arrow truncated": _truncate("pairs.arrow", 100),
    "pairs.arrow junk": _junk("pairs.arrow"),
    "pairs.arrow deleted": lambda folder: (folder / "pairs.arrow").unlink(),
    "text_id.bin truncated": _truncate("text_id.bin", 16),
    "lang_pair.bin truncated": _truncate("lang_pair.bin", 2),
    "src_length.bin emptied": _truncate("src_length.bin", 0),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_cache_is_said_in_one_line_and_converted_again(tmp_path, caplog, damage) -> None:
    """A cache folder that does not match its files (edited row count, junk or truncated files, a
    deleted file) is never trusted: one warning naming the folder, then a fresh conversion that
    reads every pair again."""
    from tests.training.test_training_trainer import write_corpus

    path = write_corpus(tmp_path / "p.tsv", n=300)
    first, _ = _converted(path, tmp_path / "cache", tgt_lang="de")
    (folder,) = (tmp_path / "cache" / "corpora").iterdir()
    DAMAGES[damage](folder)
    caplog.clear()
    with caplog.at_level("INFO", logger="babelspace.data"):
        again, report = _converted(path, tmp_path / "cache", tgt_lang="de")
    assert again == first and (report.read, report.kept) == (300, 300)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and f"the converted corpus {folder} is damaged" in warned[0], warned
    assert "converting it again" in warned[0] and "\n" not in warned[0]
    assert [p.name for p in (tmp_path / "cache" / "corpora").iterdir()] == [folder.name]  # no debris


def test_a_copy_under_another_name_reports_its_own_path(tmp_path) -> None:
    """Conversions are keyed by content: a byte copy reuses the first file's conversion, but its
    report and its pairs' origins name the copy, the path given this time."""
    from tests.training.test_training_trainer import write_corpus

    path = write_corpus(tmp_path / "p.tsv", n=50)
    (tmp_path / "other").mkdir()
    copy = tmp_path / "other" / "renamed.tsv"
    shutil.copyfile(path, copy)
    _converted(path, tmp_path / "cache", tgt_lang="de")
    corpus = open_corpus(str(copy), ReadOptions(tgt_lang="de"), tmp_path / "cache")
    assert len(list((tmp_path / "cache" / "corpora").iterdir())) == 1  # one conversion, reused
    assert corpus.report.source == str(copy) and corpus.report.summary().startswith(f"{copy}: read 50")
    assert {p.origin.rsplit(":", 1)[0] for p in CorpusRows(corpus)} == {str(copy)}


def test_a_small_file_converts_on_a_nearly_full_disk(tmp_path, monkeypatch) -> None:
    """The space a conversion needs is estimated from its input (a 27 KB TSV needs about 1 MiB), not
    a fixed 64 MiB: it converts with 30 MB free."""
    from tests.training.test_training_trainer import write_corpus

    path = write_corpus(tmp_path / "p.tsv", n=900)
    assert 20_000 < path.stat().st_size < 40_000
    free = 30 * 10**6
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(free, free, free))  # type: ignore[attr-defined]
    pairs, report = _converted(path, tmp_path / "cache", tgt_lang="de")
    assert report.kept == 900
