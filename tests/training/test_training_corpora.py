"""The data side of a training run (training/setup/corpora.py): which side of mined pairs the
teacher reads, ``--split`` of dataset folders (``--data`` syntax and formats: test_data_formats.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from babelspace.cli import build_parser
from babelspace.cli.train import config_from_args
from babelspace.errors import CorpusFormatError, TrainingError
from babelspace.training.config import TrainConfig
from babelspace.training.setup.corpora import load_corpora, read_options
from tests.training.test_training_trainer import DE, EN, write_corpus


def _mined_de_en(tmp_path: Path, n: int = 300) -> tuple[Path, set[str]]:
    """`babelspace mine --src X.de --tgt X.en --src-lang de --tgt-lang en` output: German source
    side, English target side, the languages in the summary."""
    lines = write_corpus(tmp_path / "p.tsv", n=n).read_text().splitlines()
    pairs = [line.split("\t") for line in lines]
    mined = tmp_path / "mined.tsv"
    mined.write_text("".join(f"{1.2 - i / 1000:.4f}\t{de}\t{en}\n" for i, (en, de) in enumerate(pairs)))
    summary = {"output": "mined.tsv", "src_lang": "de", "tgt_lang": "en"}
    (tmp_path / "mined.summary.json").write_text(json.dumps(summary))
    return mined, {en for en, _ in pairs}


def test_mined_de_en_feeds_the_english_side_to_the_teacher(tmp_path, caplog) -> None:
    """The teacher reads every pair's source side: mined de→en pairs are trained with their sides
    swapped (said in one line), so no German text is a teacher target."""
    mined, english = _mined_de_en(tmp_path)
    cfg = TrainConfig(data=[str(mined)], dev_pairs=20, cache_dir=tmp_path / "cache")
    with caplog.at_level("INFO", logger="babelspace.training"):
        train, dev = load_corpora(cfg)
    for pairs in (train.pairs, dev.pairs):
        assert {(p.src_lang, p.tgt_lang) for p in pairs} == {("en", "de")}
        assert {p.src for p in pairs} <= english and not {p.tgt for p in pairs} & english
    assert any("mined de→en" in r.getMessage() and "sides swapped" in r.getMessage() for r in caplog.records)
    assert all(w in EN for w in train.pairs[0].src.split()) and all(
        w in DE for w in train.pairs[0].tgt.split()
    )


def test_split_flag_picks_a_dataset_dict_split(tmp_path) -> None:
    """A DatasetDict folder without a train split: the error names --split, which exists and
    reads the split it names."""
    import datasets

    rows = {"src": ["the cat", "a dog", "one day"], "tgt": ["die katze", "ein hund", "ein tag"]}
    folder = tmp_path / "dd"
    datasets.DatasetDict(
        {"dev": datasets.Dataset.from_dict(rows), "test": datasets.Dataset.from_dict(rows)}
    ).save_to_disk(str(folder))
    base = ["train", "--data", str(folder), "--tgt-lang", "de", "--cache-dir", str(tmp_path / "cache")]
    cfg = config_from_args(build_parser().parse_args(base))
    with pytest.raises(
        CorpusFormatError, match=r"no split 'train' \(splits are dev, test; pass --split NAME\)"
    ):
        load_corpora(cfg)
    cfg = config_from_args(build_parser().parse_args([*base, "--split", "dev"]))
    assert cfg.split == "dev" and read_options(cfg).split == "dev"
    from babelspace.data.arrow_corpus import CorpusRows, open_corpus

    corpus = open_corpus(str(folder), read_options(cfg), tmp_path / "cache")
    assert [p.tgt for p in CorpusRows(corpus)] == rows["tgt"]


def test_dev_pairs_0_trains_a_corpus_too_small_for_a_dev_set(
    tmp_path, tiny_teacher_dir, tiny_model_dir, capsys
) -> None:
    """80 pairs cannot spare a dev set of 10 (the share is capped at 10%): the error names
    --dev-pairs 0 --model-from final, which trains without a dev check, exports the last step and says so."""
    from babelspace.cli import main

    corpus = write_corpus(tmp_path / "p80.tsv", n=80)
    with pytest.raises(TrainingError, match="pass --model-from final"):
        TrainConfig(data=[str(corpus)], dev_pairs=0)
    out = tmp_path / "out"
    args = ["train", "--data", str(corpus), "--tgt-lang", "de", "--teacher", str(tiny_teacher_dir),
            "--student", str(tiny_model_dir), "--out", str(out), "--batch-size", "4", "--max-steps", "4",
            "--eval-every", "2", "--max-seq-length", "16", "--projection-fit-pairs", "32",
            "--cache-dir", str(tmp_path / "cache"), "--test-sentences", "0", "--threads", "1"]  # fmt: skip
    assert main(args) == 2
    assert "give at least 100 pairs, or train without a dev set (--dev-pairs 0 --model-from final)" in (
        capsys.readouterr().err
    )
    assert main([*args, "--dev-pairs", "0", "--model-from", "final"]) == 0
    printed = capsys.readouterr().out
    assert "saved final model (step 4)" in printed
    assert "dev at final step: none (--dev-pairs 0: no dev set, no dev check)" in printed
    assert (out / "model.safetensors").is_file()
    assert json.loads((out / "babelspace_best.json").read_text())["step"] == 4


def test_in_memory_sources_are_one_indexed_training_set_with_the_list_samplers_batches() -> None:
    """Every training set is an `IndexedCorpus`, in-memory sources included; its integer arrays
    give the batches the sampler draws over the same pairs as a list (groups per source and
    language pair, weights, length buckets, no shared text in a batch)."""
    from babelspace.data.indexed_pairs import IndexedCorpus
    from babelspace.data.mix import group_key_for, group_weights
    from babelspace.data.pairs import ParallelPair
    from babelspace.data.sampling import BalancedBatchSampler

    langs = ["de", "fr", "sw"]
    verses = [ParallelPair(f"v{i % 40} " * (i % 7 + 1), f"w{i}", "en", langs[i % 3], f"bible:x:Gen:1:{i}")
              for i in range(300)]  # fmt: skip
    strings = [ParallelPair(f"s{i}", f"s{i}", "en", "en", f"mono-en:pymsg:m:{i}") for i in range(80)]
    names = [ParallelPair(f"n{i}", f"N{i}", "en", "de", f"cldr:territories:{i}") for i in range(30)]
    pairs = verses + strings + names
    train = IndexedCorpus.from_pairs("train", pairs)
    assert [p.source for p in train.pairs.parts] == ["bible", "mono-en:pymsg", "cldr"]
    assert list(train.pairs) == pairs
    keys = sorted({group_key_for(p) for p in pairs})
    weights = group_weights(keys, {"bible": 1.0, "mono-en:pymsg": 0.5, "cldr": 0.25})
    common = {"bucket_by_length": True, "seed": 3, "distinct_texts": True, "group_weights": weights}
    listed = BalancedBatchSampler(pairs, 24, group_key=group_key_for, **common)
    indexed = BalancedBatchSampler(train.pairs.arrays(by_source=True, texts=True), 24, **common)
    assert indexed.group_names == listed.group_names == keys
    assert [indexed.batch(s) for s in range(30)] == [listed.batch(s) for s in range(30)]
