"""Readers: happy paths, every bad-input case with its file:line, skipping and counting."""

from __future__ import annotations

from pathlib import Path

import pytest

from babelspace.data.languages import lang_from_suffix, validate_lang
from babelspace.data.mix import DataMixError
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.data.readers import load_parallel, read_aligned, read_hf_dataset, read_tsv
from babelspace.errors import CorpusFormatError, ResourceError


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


# ------------------------------------------------------------------ languages and pairs
def test_validate_lang():
    assert validate_lang("DE") == "de"
    assert validate_lang("deu") == "deu"
    assert validate_lang("ZHO_hans") == "zho_Hans"
    for bad in ("xx", "q", "de-DE", "zho_Ha", "english"):
        with pytest.raises(CorpusFormatError, match=f"<argument>: unknown language code '{bad}'"):
            validate_lang(bad)
    with pytest.raises(CorpusFormatError, match="^f.tsv:3: unknown language code 'xx'"):
        validate_lang("xx", "f.tsv", 3)


def test_lang_from_suffix():
    assert lang_from_suffix("corpus.de") == "de"
    assert lang_from_suffix("train.en-de.de") == "de"
    assert lang_from_suffix("dev.zho_Hans") == "zho_Hans"
    assert lang_from_suffix("dev.deu") == "deu"
    assert lang_from_suffix("corpus.txt") is None
    assert lang_from_suffix("corpus") is None
    assert lang_from_suffix("corpus.xx") is None


def test_normalize_whitespace():
    assert normalize_whitespace("  a \t b\u3000c\u00a0 d\n") == "a b c d"


def test_corpus_fingerprint_dedup_langpairs():
    report = ReadReport("mem")
    pairs = [
        ParallelPair("a", "b", "en", "de", "x:1"),
        ParallelPair("a", "b", "en", "de", "x:2"),
        ParallelPair("a", "b", "en", "fr", "x:3"),
    ]
    corpus = ParallelCorpus("mem", pairs, report)
    assert corpus.lang_pairs() == {("en", "de"): 2, ("en", "fr"): 1}
    deduped = corpus.dedup()
    assert len(deduped) == 2 and deduped.report.skipped == {"duplicate": 1}
    assert corpus.report.skipped == {}  # the original is untouched
    # Fingerprint: stable, origin-independent, order- and text-sensitive.
    same = ParallelCorpus(
        "other", [ParallelPair(p.src, p.tgt, p.src_lang, p.tgt_lang, "y") for p in pairs], report
    )
    assert corpus.fingerprint() == same.fingerprint()
    assert corpus.fingerprint() != deduped.fingerprint()
    assert len(corpus.fingerprint()) == 64
    assert "mem: read 0, kept 2, skipped 1 (duplicate 1)" in deduped.report.summary()


# ------------------------------------------------------------------ TSV
def test_tsv_two_columns(tmp_path):
    p = write(tmp_path / "c.tsv", "Hello  world\tHallo Welt\r\n Good\tGut \n\n\n")
    corpus = read_tsv(p, tgt_lang="de")
    assert [(x.src, x.tgt, x.src_lang, x.tgt_lang) for x in corpus.pairs] == [
        ("Hello world", "Hallo Welt", "en", "de"),
        ("Good", "Gut", "en", "de"),
    ]
    assert corpus.pairs[1].origin == f"{p}:2"
    assert corpus.report.read == 2 and corpus.report.kept == 2 and not corpus.report.skipped


def test_tsv_two_columns_needs_target_language(tmp_path):
    p = write(tmp_path / "c.tsv", "a\tb\n")
    with pytest.raises(CorpusFormatError, match="tgt_lang"):
        read_tsv(p)


def test_tsv_four_columns(tmp_path):
    p = write(tmp_path / "c.tsv", "\ufeffHello\tHallo\ten\tde\nYes\tOui\tEN\tfr\n")
    corpus = read_tsv(p)
    assert [(x.src, x.src_lang, x.tgt_lang) for x in corpus.pairs] == [
        ("Hello", "en", "de"),
        ("Yes", "en", "fr"),
    ]
    assert corpus.lang_pairs() == {("en", "de"): 1, ("en", "fr"): 1}


BAD_TSV = {
    # reason: (file content, bad line)
    "wrong column count": ("a\tb\ten\tde\nc\td\n", 2),
    "empty side": ("a\tb\ten\tde\n  \td\ten\tde\n", 2),
    "unknown language code": ("a\tb\ten\tde\nc\td\ten\txx\ne\tf\ten\tde\n", 2),
}


@pytest.mark.parametrize("reason", sorted(BAD_TSV))
def test_tsv_bad_line_raises_then_skips(tmp_path, reason):
    content, line = BAD_TSV[reason]
    p = write(tmp_path / "bad.tsv", content)
    with pytest.raises(CorpusFormatError, match=f"^{p}:{line}: {reason}") as info:
        read_tsv(p)
    assert info.value.line == line and info.value.path == str(p)
    corpus = read_tsv(p, skip_bad_lines=True)
    assert corpus.report.skipped == {reason: 1}
    assert corpus.report.kept == len(corpus) == corpus.report.read - 1
    assert all(not x.origin.endswith(f":{line}") for x in corpus.pairs)


def test_tsv_invalid_utf8(tmp_path):
    p = write(tmp_path / "bad.tsv", b"a\tb\nc\xff\xfe\td\ne\tf\n")
    with pytest.raises(CorpusFormatError, match=f"^{p}:2: invalid utf-8"):
        read_tsv(p, tgt_lang="de")
    corpus = read_tsv(p, tgt_lang="de", skip_bad_lines=True)
    assert corpus.report.skipped == {"invalid utf-8": 1}
    assert [x.src for x in corpus.pairs] == ["a", "e"]


def test_tsv_blank_line_in_the_middle(tmp_path):
    p = write(tmp_path / "bad.tsv", "a\tb\n\nc\td\n\n")
    with pytest.raises(CorpusFormatError, match=f"^{p}:2: wrong column count"):
        read_tsv(p, tgt_lang="de")
    assert read_tsv(p, tgt_lang="de", skip_bad_lines=True).report.skipped == {"wrong column count": 1}


def test_tsv_counts_several_reasons(tmp_path, caplog):
    p = write(tmp_path / "bad.tsv", b"a\tb\nx\n\tq\nc\x80\td\nok\tok\n")
    corpus = read_tsv(p, tgt_lang="fr", skip_bad_lines=True)
    assert corpus.report.skipped == {"wrong column count": 1, "empty side": 1, "invalid utf-8": 1}
    assert len(corpus) == 2 and corpus.report.read == 5
    assert f"{p}:2" in caplog.text  # skipped lines are logged with where they were


# ------------------------------------------------------------------ aligned files
def test_aligned_languages_from_suffix(tmp_path):
    s = write(tmp_path / "train.en-de.en", "Hello\nGood  morning\n")
    t = write(tmp_path / "train.en-de.de", "Hallo\nGuten Morgen\n\n")
    corpus = read_aligned(s, t)
    assert [(x.src, x.tgt, x.src_lang, x.tgt_lang) for x in corpus.pairs] == [
        ("Hello", "Hallo", "en", "de"),
        ("Good morning", "Guten Morgen", "en", "de"),
    ]
    # Arguments win over suffixes.
    assert read_aligned(s, t, tgt_lang="deu").pairs[0].tgt_lang == "deu"


def test_aligned_needs_languages(tmp_path):
    s, t = write(tmp_path / "a.txt", "x\n"), write(tmp_path / "b.txt", "y\n")
    with pytest.raises(CorpusFormatError, match="src_lang"):
        read_aligned(s, t)


def test_aligned_mismatched_line_counts(tmp_path):
    s = write(tmp_path / "c.en", "1\n2\n3\n")
    t = write(tmp_path / "c.de", "1\n2\n")
    with pytest.raises(CorpusFormatError, match=f"^{t}:2: file ends here after 2 lines, but {s} has 3"):
        read_aligned(s, t)
    with pytest.raises(CorpusFormatError, match=f"^{t}:2:"):  # never skippable
        read_aligned(s, t, skip_bad_lines=True)


def test_aligned_bad_lines(tmp_path):
    s = write(tmp_path / "c.en", b"a\nb\nc\n")
    t = write(tmp_path / "c.de", b"A\n \n\xc3\x28\n")
    with pytest.raises(CorpusFormatError, match=f"^{t}:2: empty side"):
        read_aligned(s, t)
    corpus = read_aligned(s, t, skip_bad_lines=True)
    assert corpus.report.skipped == {"empty side": 1, "invalid utf-8": 1}
    assert [x.src for x in corpus.pairs] == ["a"]
    s2 = write(tmp_path / "d.en", b"a\n\xff\n")
    t2 = write(tmp_path / "d.de", b"A\nB\n")
    with pytest.raises(CorpusFormatError, match=f"^{s2}:2: invalid utf-8"):
        read_aligned(s2, t2)


# ------------------------------------------------------------------ Hugging Face datasets
def test_hf_dataset_round_trip(tmp_path):
    import datasets

    rows = {"src": ["Hello", " Yes ", "No"], "tgt": ["Hallo", "Oui", "Nein"], "tl": ["de", "fr", "de"]}
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "ds"))
    corpus = read_hf_dataset(tmp_path / "ds", tgt_lang_col="tl")
    assert [(x.src, x.tgt, x.tgt_lang) for x in corpus.pairs] == [
        ("Hello", "Hallo", "de"),
        ("Yes", "Oui", "fr"),
        ("No", "Nein", "de"),
    ]
    assert corpus.pairs[2].origin == f"{tmp_path / 'ds'}:2"

    dd = datasets.DatasetDict(
        train=datasets.Dataset.from_dict({"en": ["a", "b"], "de": ["A", "B"]}),
        dev=datasets.Dataset.from_dict({"en": ["c"], "de": ["C"]}),
    )
    dd.save_to_disk(str(tmp_path / "dd"))
    dev = read_hf_dataset(tmp_path / "dd", src_col="en", tgt_col="de", tgt_lang="de", split="dev")
    assert [x.src for x in dev.pairs] == ["c"]
    with pytest.raises(CorpusFormatError, match="no column 'src'"):
        read_hf_dataset(tmp_path / "dd", tgt_lang="de")
    with pytest.raises(CorpusFormatError, match="no split 'test'"):
        read_hf_dataset(tmp_path / "dd", src_col="en", tgt_col="de", tgt_lang="de", split="test")


def test_hf_dataset_bad_rows(tmp_path):
    import datasets

    rows = {"src": ["a", "", "c", "d"], "tgt": ["A", "B", None, "D"], "tl": ["de", "de", "de", "xx"]}
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(CorpusFormatError, match=f"^{tmp_path / 'ds'}:1: empty side"):
        read_hf_dataset(tmp_path / "ds", tgt_lang_col="tl")
    corpus = read_hf_dataset(tmp_path / "ds", tgt_lang_col="tl", skip_bad_lines=True)
    assert corpus.report.skipped == {"empty side": 2, "unknown language code": 1}
    assert [x.src for x in corpus.pairs] == ["a"]


# ------------------------------------------------------------------ dispatcher
def test_load_parallel_dispatch(tmp_path):
    import datasets

    tsv = write(
        tmp_path / "c.tsv", "".join(f"s{i}\tt{i}\ten\t{'de' if i % 3 else 'fr'}\n" for i in range(30))
    )
    corpus = load_parallel(str(tsv))
    assert len(corpus) == 30
    assert corpus.lang_pairs() == {("en", "de"): 20, ("en", "fr"): 10}
    assert load_parallel(str(tsv), langs=["fr"]).lang_pairs() == {("en", "fr"): 10}

    sub = load_parallel(str(tsv), max_pairs=9, seed=1)
    assert sub.lang_pairs() == {("en", "de"): 6, ("en", "fr"): 3}  # stratified
    assert sub.pairs == load_parallel(str(tsv), max_pairs=9, seed=1).pairs  # seeded
    assert sub.report.skipped == {"over max_pairs": 21}
    origins = [int(x.origin.rsplit(":", 1)[1]) for x in sub.pairs]
    assert origins == sorted(origins)  # original order kept

    s, t = write(tmp_path / "a.en", "x\ny\n"), write(tmp_path / "a.sw", "X\nY\n")
    assert load_parallel(f"aligned:{s}+{t}").lang_pairs() == {("en", "sw"): 2}
    with pytest.raises(DataMixError, match=f"two line-aligned files go as 'aligned:{s}\\+{t}'"):
        load_parallel(f"{s},{t}")  # the old spelling: a comma separates the corpora of a mix

    datasets.Dataset.from_dict({"src": ["a"], "tgt": ["b"]}).save_to_disk(str(tmp_path / "ds"))
    assert len(load_parallel(str(tmp_path / "ds"), tgt_lang="de")) == 1

    txt = write(tmp_path / "tabbed.txt", "a\tb\n")
    assert len(load_parallel(str(txt), tgt_lang="de")) == 1
    plain = write(tmp_path / "plain.txt", "no tabs here\n")
    with pytest.raises(CorpusFormatError, match="not a TSV"):
        load_parallel(str(plain))


def test_load_parallel_missing(tmp_path):
    with pytest.raises(ResourceError, match="corpus not found"):
        load_parallel(str(tmp_path / "nope.tsv"))
    with pytest.raises(DataMixError, match="nope.de does not exist"):
        load_parallel(f"aligned:{write(tmp_path / 'a.en', 'x')}+{tmp_path / 'nope.de'}")


def test_encode_reads_every_line_and_counts_blank_ones(tmp_path) -> None:
    from babelspace.data.readers import read_text_lines

    f = tmp_path / "s.txt"
    f.write_bytes(b"one\r\n\ntwo\n  \n")
    assert read_text_lines(f) == (["one", "", "two", "  "], 2)
    empty = tmp_path / "e.txt"
    empty.write_bytes(b"")
    assert read_text_lines(empty) == ([], 0)
    bad = tmp_path / "b.txt"
    bad.write_bytes(b"ok\n\xff\n")
    with pytest.raises(CorpusFormatError, match=r"b\.txt:2"):
        read_text_lines(bad)


def test_encode_refuses_unwritable_out_before_work(tmp_path, capsys) -> None:
    from babelspace.cli import main

    src = tmp_path / "s.txt"
    src.write_text("hello\n")
    (tmp_path / "afile").write_text("x")
    assert main(["encode", "no-such-model", str(src), "--out", str(tmp_path / "afile" / "x.npy")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["encode", "no-such-model", str(src), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
