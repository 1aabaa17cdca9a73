"""The token cache: batches built from cached token ids equal the tokenizer's own on real text
(prompt, special tokens, truncation at the max length, padding), for in-memory pairs and converted
corpora; a table is keyed so that another tokenizer, length or prompt never reuses it; ``auto``
builds only when it pays; a damaged table is built again; training with it gives the same weights."""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.data.arrow_corpus import CorpusRows, ReadOptions, open_corpus
from babelspace.data.indexed_pairs import IndexedCorpus, PairParts
from babelspace.data.pairs import ParallelPair
from babelspace.data.readers import load_parallel
from babelspace.models.encoder import tokenize
from babelspace.models.token_ids import IdLayout, tokenizer_key
from babelspace.objectives import base
from babelspace.objectives.bottleneck import BottleneckObjective
from babelspace.objectives.contrastive import ContrastiveObjective
from babelspace.objectives.distillation import DistillationObjective
from babelspace.objectives.mexma import MexmaObjective
from babelspace.training import batches
from babelspace.training.setup import token_plan
from babelspace.training.setup.token_plan import train_tokens
from babelspace.training.trainer import train
from tests.training.test_training_trainer import _assert_same_weights, tiny_config, write_corpus

MAX_LEN = 24  # the tiny WordPiece vocabulary spells most words letter by letter: many verses exceed it


@pytest.fixture(scope="module")
def verses() -> list[ParallelPair]:
    """120 verses, every third cut to its first words (rows shorter than the max length too)."""
    pairs = load_parallel("bible", langs=["de"], split="dev").pairs[:120]
    return [p if i % 3 else _opening(p) for i, p in enumerate(pairs)]


def _opening(p: ParallelPair) -> ParallelPair:
    return ParallelPair(
        " ".join(p.src.split()[:2]), " ".join(p.tgt.split()[:2]), p.src_lang, p.tgt_lang, p.origin
    )


def _student(path, prompt: str = "query: ", max_len: int = MAX_LEN) -> SentenceTransformer:
    model = SentenceTransformer(str(path), device="cpu")
    model.max_seq_length = max_len
    if prompt:
        model.prompts, model.default_prompt_name = {"query": prompt}, "query"
    return model


def _same(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for key, value in a.items():
        if isinstance(value, torch.Tensor):
            assert value.dtype == b[key].dtype and torch.equal(value, b[key]), key
        else:
            assert value == b[key], key


def _assert_batches_equal_tokenizer(tokens, train_pairs, objective, rng) -> None:
    student, prompt = objective.student, objective.prompt
    for _ in range(4):
        idx = rng.choice(len(train_pairs), 16, replace=False)
        pairs = [train_pairs[i] for i in idx.tolist()]
        src, tgt = tokens.ids(idx)
        texts = [prompt + p.src for p in pairs] + [prompt + p.tgt for p in pairs]
        _same(tokens.layout.features(src + tgt), dict(tokenize(student, texts)))


def test_cached_batches_equal_the_tokenizer_on_bible_verses(
    tiny_model_dir, tmp_path, verses, monkeypatch
) -> None:
    """Bible verses with a prompt, many longer than the max length: the ids padded from the cache are
    the tokenizer's tensors, and every objective's collated batch is the one it tokenizes itself."""
    student = _student(tiny_model_dir)
    mono = [ParallelPair(p.src, p.src, "en", "en", "x") for p in verses[:20]]  # (s, s) rows
    train_set = IndexedCorpus.from_pairs("train", verses + mono)
    objective = ContrastiveObjective(student)
    tokens = train_tokens(train_set, 10, objective, "on", tmp_path)
    assert tokens is not None
    lengths = tokens.tables[0].lengths(np.arange(tokens.tables[0].texts))
    assert (lengths == MAX_LEN).any() and (lengths < MAX_LEN).any()  # truncated and padded rows
    assert tokens.tables[0].texts < 2 * len(train_set)  # each distinct text once
    _assert_batches_equal_tokenizer(tokens, train_set.pairs, objective, np.random.default_rng(0))

    distill = DistillationObjective(student, lambda texts: np.zeros((len(texts), 8), dtype=np.float32))
    mexma = MexmaObjective(student, head_layers=1, head_heads=4)
    bottleneck = BottleneckObjective(student, decoder_layers=1, decoder_heads=4, denoise_ratio=0.2)
    idx = [3, 130, 7, 0, 135, 119]  # both kinds of rows: distillation's target subset
    pairs = [train_set.pairs[i] for i in idx]
    plan = token_plan_stub(train_set)
    calls = []
    monkeypatch.setattr(base, "tokenize", lambda model, texts: calls.append(texts) or tokenize(model, texts))
    for obj in (objective, distill, mexma, bottleneck):  # MEXMA's masks, the noise: from torch's RNG
        torch.manual_seed(0)
        got = batches.StepBatches(plan, obj, 0, 1, tokens=tokens).collate(idx, pairs)
        assert calls == [], obj.name  # every encoder input came from the cache
        torch.manual_seed(0)
        _same_batch(got, batches.StepBatches(plan, obj, 0, 1).collate(idx, pairs))
        assert calls, obj.name
        calls.clear()
        assert obj.cached_ids is None  # cleared after the batch


def _same_batch(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        if isinstance(value, dict):
            _same(got[key], value)
        elif isinstance(value, torch.Tensor):
            assert torch.equal(got[key], value), key
        else:
            assert got[key] == value, key


def test_pairs_cross_processes_intact(verses) -> None:
    """A loader worker pickles every batch's pairs to the trainer: they come back equal."""
    assert pickle.loads(pickle.dumps(verses, protocol=5)) == verses


def token_plan_stub(train_set):
    """A plan whose batches are never drawn (StepBatches.collate is called directly)."""

    class Plan:
        train, total_steps = train_set, 1

    return Plan()


def test_a_converted_corpus_has_its_table_beside_it(tiny_model_dir, tmp_path, verses) -> None:
    """A TSV converted into the Arrow cache, mixed with in-memory pairs: the corpus's table lies in its
    folder, the list's in the cache, and both rebuild the tokenizer's tensors."""
    tsv = tmp_path / "verses.tsv"
    tsv.write_text("".join(f"{p.src}\t{p.tgt}\ten\tde\n" for p in verses[:80]))
    corpus = open_corpus(str(tsv), ReadOptions(), tmp_path / "cache")
    rows = CorpusRows(corpus, np.arange(10, 80))  # a subset: the table holds the whole corpus
    parts = PairParts([("verses.tsv", rows), ("bible", list(verses[80:]))])
    train_set = IndexedCorpus("train", parts, None)
    objective = ContrastiveObjective(_student(tiny_model_dir))
    tokens = train_tokens(train_set, 10, objective, "on", tmp_path / "cache")
    assert tokens is not None
    assert tokens.tables[0].folder.parent.parent == corpus.folder
    assert tokens.tables[0].rows == len(corpus)
    assert tokens.tables[1].folder.is_relative_to(tmp_path / "cache" / "tokens")
    _assert_batches_equal_tokenizer(tokens, list(parts), objective, np.random.default_rng(1))


def test_another_tokenizer_length_or_prompt_gets_its_own_table(
    tiny_model_dir, tmp_path, verses, monkeypatch
) -> None:
    pairs = IndexedCorpus.from_pairs("train", verses[:40])
    base = _student(tiny_model_dir)
    other_vocab = _student(tiny_model_dir)
    other_vocab.tokenizer.add_tokens(["herrlichkeit"])
    variants = [base, _student(tiny_model_dir, max_len=16), _student(tiny_model_dir, prompt=""), other_vocab]
    keys = {tokenizer_key(m, ContrastiveObjective(m).prompt) for m in variants}
    assert len(keys) == len(variants)
    assert tokenizer_key(_student(tiny_model_dir), "query: ") == tokenizer_key(base, "query: ")
    folders = set()
    for model in variants:
        objective = ContrastiveObjective(model)
        tokens = train_tokens(pairs, 10, objective, "on", tmp_path)
        folders.add(tokens.tables[0].folder)
        _assert_batches_equal_tokenizer(tokens, pairs.pairs, objective, np.random.default_rng(2))
    assert len(folders) == len(variants)

    def no_build(*args, **kwargs):
        raise AssertionError("an existing table was built again")

    monkeypatch.setattr(token_plan, "write_table", no_build)
    again = train_tokens(pairs, 10, ContrastiveObjective(_student(tiny_model_dir)), "on", tmp_path)
    assert again.tables[0].folder in folders


def test_auto_builds_a_table_only_when_it_pays(tiny_model_dir, tmp_path, verses, caplog) -> None:
    pairs = IndexedCorpus.from_pairs("train", verses[:40])
    objective = ContrastiveObjective(_student(tiny_model_dir))
    with caplog.at_level(logging.INFO):
        assert train_tokens(pairs, 5, objective, "auto", tmp_path) is None  # 10 texts < 80 to build
    assert "token cache: not built" in caplog.text
    assert not (tmp_path / "tokens").exists()
    assert train_tokens(pairs, 40, objective, "auto", tmp_path) is not None  # one epoch pays
    assert train_tokens(pairs, 1, objective, "auto", tmp_path) is not None  # it exists: used
    assert train_tokens(pairs, 40, objective, "off", tmp_path) is None


def test_a_damaged_table_is_said_and_built_again(tiny_model_dir, tmp_path, verses, caplog) -> None:
    pairs = IndexedCorpus.from_pairs("train", verses[:40])
    objective = ContrastiveObjective(_student(tiny_model_dir))
    folder = train_tokens(pairs, 10, objective, "on", tmp_path).tables[0].folder
    ids = folder / "ids.bin"
    ids.write_bytes(ids.read_bytes()[:-4])
    with caplog.at_level(logging.WARNING):
        tokens = train_tokens(pairs, 10, objective, "on", tmp_path)
    assert "is damaged (ids.bin has" in caplog.text
    _assert_batches_equal_tokenizer(tokens, pairs.pairs, objective, np.random.default_rng(3))
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporary left


def test_features_that_ids_cannot_rebuild_are_refused(tiny_model_dir, verses) -> None:
    """`IdLayout.difference` names what differs (a run then tokenizes its batches)."""
    student = _student(tiny_model_dir, prompt="")
    layout = IdLayout.of(student)
    texts = [p.tgt for p in verses[:4]]
    rows = [np.asarray(r, dtype=np.int32) for r in student.tokenizer(texts, truncation=True)["input_ids"]]
    assert layout.difference(student, texts, rows) is None
    rows[1] = rows[1][:-1]
    assert "input_ids differs" in layout.difference(student, texts, rows)
    rows[1] = np.asarray(student.tokenizer(texts[1], truncation=True)["input_ids"], dtype=np.int32)
    student.tokenizer.padding_side = "left"
    left = IdLayout.of(student)
    assert left.left and left.difference(student, texts, rows) is None
    assert layout.difference(student, texts, rows) is not None  # right-padded: not the tokenizer's now


def test_training_from_the_token_cache_gives_the_same_weights(
    tiny_teacher_dir, tiny_model_dir, tmp_path, caplog
) -> None:
    """``--token-cache on`` (read in 2 loader workers) against ``off``: the very same weights."""
    corpus = write_corpus(tmp_path / "pairs.tsv")
    kw = dict(max_steps=4, eval_every=4, save_every=4, warmup=0, projection_init="random")
    off = train(
        tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_model_dir, corpus, token_cache="off", **kw)
    )
    with caplog.at_level(logging.INFO, logger="babelspace"):
        on = train(
            tiny_config(
                tmp_path / "b",
                tiny_teacher_dir,
                tiny_model_dir,
                corpus,
                token_cache="on",
                loader_workers=2,
                **kw,
            )
        )
    (table,) = (tmp_path / "b" / "cache" / "corpora").glob("*/tokens/*")
    assert f"token cache: {table}" in caplog.text
    _assert_same_weights(off.output, on.output)
