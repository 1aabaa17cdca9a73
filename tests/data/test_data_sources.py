"""Data sources beyond the Bible: loading offline, langs and origins, held-out splits, mix specs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from babelspace.data import sources
from babelspace.data.mix import DataMixError, group_key_for, group_weights, parse_data_mix, source_of
from babelspace.data.pairs import ParallelPair
from babelspace.data.readers import load_parallel
from babelspace.data.sources import SOURCES, cldr, english, load_source
from babelspace.data.sources.cldr import CLDR_TEST_CATEGORIES
from babelspace.data.sources.splits import split_of_text
from babelspace.errors import ResourceError

# Sources that install with `pip install -e ".[offline]"` (wordnet needs Debian's wordnet-base).
PIP_SOURCES = ["cldr", "mono-en:fortunes", "mono-en:pydoc", "mono-en:pymsg"]
BIBLE_LANGS = {"ar", "bn", "de", "es", "fa", "fr", "hi", "id", "it", "ja", "ko", "pl", "pt", "ro", "ru"}
BIBLE_LANGS |= {"sw", "tl", "tr", "uk", "vi", "zh"}


def _clear_caches() -> None:
    sources._mono_cached.cache_clear()
    cldr._cldr_category_pairs.cache_clear()
    cldr._cldr_reserved_texts.cache_clear()


def _texts(corpus) -> set[str]:
    return {t for p in corpus.pairs for t in (p.src, p.tgt)}


@pytest.mark.parametrize("name", PIP_SOURCES)
def test_source_loads_offline_with_langs_and_origins(name: str) -> None:
    corpus = load_source(name, split="train")
    assert len(corpus) > 500
    for p in corpus.pairs:
        assert p.origin.startswith(name + ":")
        assert source_of(p) == name
        assert p.src and p.tgt and p.src_lang == "en"
    if name == "cldr":
        assert {p.tgt_lang for p in corpus.pairs} == BIBLE_LANGS
        assert not any(p.origin.split(":")[1] in CLDR_TEST_CATEGORIES for p in corpus.pairs)
    else:
        assert all(p.tgt_lang == "en" and p.src == p.tgt for p in corpus.pairs)


@pytest.mark.parametrize("name", PIP_SOURCES)
def test_held_out_split_is_disjoint_by_text_and_deterministic(name: str) -> None:
    train, dev, test = (load_source(name, split=s) for s in ("train", "dev", "test"))
    assert len(test) > 50 and len(dev) > 50
    assert not _texts(train) & _texts(test)
    assert not _texts(train) & _texts(dev)
    _clear_caches()
    again = load_source(name, split="test")
    assert again.fingerprint() == test.fingerprint()


def test_cldr_holds_out_whole_categories_and_filters_langs() -> None:
    test = load_parallel("cldr", langs=["de", "ja"], split="test")
    assert {p.origin.split(":")[1] for p in test.pairs} == set(CLDR_TEST_CATEGORIES)
    assert set(test.lang_pairs()) == {("en", "de"), ("en", "ja")}
    euro = [p for p in test.pairs if p.origin == "cldr:currencies:EUR" and p.tgt_lang == "de"]
    assert [p.tgt for p in euro] == ["Euro"]
    train = load_parallel("cldr", langs=["de"], split="train")
    de_names = {p.src: p.tgt for p in train.pairs if p.origin == "cldr:territories:DE"}
    assert de_names == {"Germany": "Deutschland"}


def test_mono_split_is_a_function_of_the_text() -> None:
    texts = [f"sentence number {i}" for i in range(2000)]
    splits = [split_of_text(t) for t in texts]
    assert splits == [split_of_text(t) for t in texts]
    share = splits.count("test") / len(splits)
    assert 0.03 < share < 0.07 and 0.03 < splits.count("dev") / len(splits) < 0.07


def _fake_wordnet(root: Path) -> Path:
    root.mkdir()
    header = "  1 This software and database is being provided to you\n"
    (root / "data.noun").write_text(
        header
        + '00001 03 n 01 cat 0 000 | feline mammal usually having thick soft fur; "the cat sat on the mat"\n'
        + '00002 03 n 01 dog 0 000 | a member of the genus Canis; "the dog barked all night"; "a loyal dog"\n'
    )
    for pos in ("verb", "adj", "adv"):
        (root / f"data.{pos}").write_text(header)
    return root


def test_wordnet_reads_definitions_and_examples(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BABELSPACE_WORDNET_DIR", str(_fake_wordnet(tmp_path / "wn")))
    _clear_caches()
    try:
        items = dict(english.wordnet_items())
    finally:
        _clear_caches()
    assert items == {
        "noun:00001:def": "feline mammal usually having thick soft fur",
        "noun:00001:ex0": "the cat sat on the mat",
        "noun:00002:def": "a member of the genus Canis",
        "noun:00002:ex0": "the dog barked all night",
        "noun:00002:ex1": "a loyal dog",
    }


def test_missing_wordnet_says_how_to_install(monkeypatch) -> None:
    monkeypatch.setenv("BABELSPACE_WORDNET_DIR", "/nonexistent")
    monkeypatch.setattr(english, "_WORDNET_DEFAULT_DIRS", ())
    with pytest.raises(ResourceError, match="apt-get install wordnet-base"):
        english.wordnet_dir()


def test_parse_data_mix() -> None:
    assert parse_data_mix("bible:1,cldr:0.5,mono-en:wordnet:0.5") == [
        ("bible", 1.0),
        ("cldr", 0.5),
        ("mono-en:wordnet", 0.5),
    ]
    assert parse_data_mix(["bible", "mono-en:pydoc"]) == [("bible", 1.0), ("mono-en:pydoc", 1.0)]
    assert parse_data_mix("cldr:2e-1") == [("cldr", 0.2)]


def test_parse_data_mix_accepts_corpus_paths(tmp_path) -> None:
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("a\tb\n")
    assert parse_data_mix(f"{tsv}:3,bible") == [(str(tsv), 3.0), ("bible", 1.0)]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bible,,cldr", "empty item"),
        ("cldr:0", "finite number > 0"),
        ("cldr:-1", "finite number > 0"),
        ("cldr:nan", "finite number > 0"),
        ("cldr:inf", "finite number > 0"),
        ("cldr:0.5x", "not a number"),
        ("wikipedia:1", "unknown source 'wikipedia'"),
        ("bible:1,bible:2", "listed twice"),
    ],
)
def test_parse_data_mix_errors(spec: str, message: str) -> None:
    with pytest.raises(DataMixError, match=message):
        parse_data_mix(spec)


def test_group_keys_and_weights() -> None:
    pairs = [
        ParallelPair("a", "b", "en", "de", "bible:s:1:1:1"),
        ParallelPair("c", "d", "en", "fr", "bible:l:1:1:2"),
        ParallelPair("Germany", "Deutschland", "en", "de", "cldr:territories:DE"),
        ParallelPair("x y z", "x y z", "en", "en", "mono-en:pydoc:json:dumps:1"),
        ParallelPair("e", "f", "en", "de", "data/my.tsv:7"),
    ]
    assert [group_key_for(p) for p in pairs] == [
        ("bible", "en", "de"),
        ("bible", "en", "fr"),
        ("cldr", "en", "de"),
        ("mono-en:pydoc", "en", "en"),
        ("data/my.tsv", "en", "de"),
    ]
    names = sorted({group_key_for(p) for p in pairs})
    weights = group_weights(names, dict(parse_data_mix("bible:1,cldr:0.5,mono-en:pydoc:0.25")))
    assert weights[("bible", "en", "de")] == weights[("bible", "en", "fr")] == 0.5
    assert weights[("cldr", "en", "de")] == 0.5
    assert weights[("mono-en:pydoc", "en", "en")] == 0.25
    assert weights[("data/my.tsv", "en", "de")] == 1.0  # not in the mix: weight 1
    assert math.isclose(sum(w for k, w in weights.items() if k[0] == "bible"), 1.0)


def test_resources_list_the_sources() -> None:
    from babelspace.resources import list_resources

    rows = {r["name"]: r for r in list_resources()}
    for name in SOURCES:
        assert rows[name]["kind"] == "corpus"
        assert rows[name]["licence"]
    for name in PIP_SOURCES:
        assert rows[name]["status"] == "ready"


@pytest.mark.slow
def test_tiny_training_on_bible_and_an_english_source(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    from sentence_transformers import SentenceTransformer

    from babelspace.data import readers
    from babelspace.training.config import TrainConfig
    from babelspace.training.trainer import train

    cfg = TrainConfig(
        teacher=str(tiny_teacher_dir),
        student=str(tiny_model_dir),
        data=["bible", "mono-en:pymsg"],
        langs=["de"],
        batch_size=8,
        max_steps=6,
        eval_every=3,
        dev_pairs=32,
        max_seq_length=16,
        projection_fit_pairs=64,
        output=tmp_path / "out",
        cache_dir=tmp_path / "cache",
        test_sentences=0,
        seed=1,
    )
    loaded: list[tuple[str, int]] = []

    def spy(name, langs=None, split="train"):
        corpus = load_source(name, langs=langs, split=split)
        loaded.append((f"{name}[{split}]", len(corpus)))
        return corpus

    monkeypatch.setattr(readers, "load_source", spy)
    res = train(cfg)
    assert res.steps == 6
    assert [name for name, n in loaded if n > 1000] == ["mono-en:pymsg[train]"]
    model = SentenceTransformer(str(res.output), device="cpu")
    assert model.encode(["file not found"]).shape == (1, 48)  # in the tiny teacher's space


def test_mix_fit_sample_follows_the_weights_not_the_sizes() -> None:
    """The closed-form fit sample of a mix takes the batches' shares per source; one corpus keeps
    the plain stratified subsample."""
    from collections import Counter

    from babelspace.data.indexed_pairs import IndexedCorpus
    from babelspace.data.pairs import ParallelPair
    from babelspace.data.readers import subsample
    from babelspace.training.config import TrainConfig
    from babelspace.training.setup.phases import FIT_SAMPLE_SEED, fit_sample

    verses = [ParallelPair(f"v{i}", f"w{i}", "en", "de", f"bible:x:Gen:1:{i}") for i in range(1000)]
    strings = [ParallelPair(f"s{i}", f"s{i}", "en", "en", f"mono-en:pymsg:m:{i}") for i in range(200)]
    train = IndexedCorpus.from_pairs("train", verses + strings)
    cfg = TrainConfig(data=["bible:1", "mono-en:pymsg:0.5"], projection_fit_pairs=90)
    assert Counter(source_of(p) for p in fit_sample(train, cfg)) == {"bible": 60, "mono-en:pymsg": 30}
    one = TrainConfig(data=["bible"], projection_fit_pairs=90)
    assert fit_sample(train, one) == subsample(train, 90, seed=one.seed + FIT_SAMPLE_SEED).pairs
