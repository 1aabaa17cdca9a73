"""The translation-bottleneck objective (LASER / SONAR family), its greedy decoding and `babelspace decode`."""

from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer

from babelspace.checkpoints.checkpoint import list_checkpoints, load_latest, load_state
from babelspace.cli import main as cli_main
from babelspace.data.pairs import ParallelPair
from babelspace.objectives.bottleneck import BottleneckObjective, greedy_decode, target_vocab
from babelspace.objectives.composite import CompositeObjective
from babelspace.objectives.decoding import load_decoder
from babelspace.objectives.distillation import DistillationObjective
from babelspace.objectives.parts.decoder import SentenceDecoder
from babelspace.training.config import TrainConfig
from babelspace.training.trainer import train
from tests.conftest import run_two_processes
from tests.objectives.test_objectives_mexma import BIBLE_PAIRS, PAIRS, _tiny
from tests.training.test_training_trainer import DE, EN, _assert_same_weights, tiny_config, write_corpus


def _objective(student: SentenceTransformer, seed: int = 0, **kwargs) -> BottleneckObjective:
    torch.manual_seed(seed)
    kwargs.setdefault("decoder_layers", 2)
    kwargs.setdefault("decoder_heads", 4)
    kwargs.setdefault("decoder_dropout", 0.0)
    return BottleneckObjective(student, **kwargs)


@pytest.fixture()
def student(tiny_nodrop_dir: Path) -> SentenceTransformer:
    return _tiny(tiny_nodrop_dir)


def _fifty_pairs() -> list[ParallelPair]:
    rng = random.Random(0)
    pairs: list[ParallelPair] = []
    seen: set[str] = set()
    while len(pairs) < 50:
        idx = [rng.randrange(len(DE)) for _ in range(rng.randint(2, 5))]
        src = " ".join(EN[i] for i in idx)
        if src not in seen:
            seen.add(src)
            pairs.append(ParallelPair(src, " ".join(DE[i] for i in idx), "en", "de", f"p:{len(pairs)}"))
    return pairs


def _round_trip(model: SentenceTransformer, text: str) -> str:
    """What the tokenizer can give back for ``text`` (lower-cased, accents stripped by WordPiece)."""
    tok = model.tokenizer
    return tok.decode(tok(text)["input_ids"], skip_special_tokens=True)


# ---------------------------------------------------------------------------------------------- structure
def test_decoder_is_tied_and_in_the_objective_state(student: SentenceTransformer) -> None:
    obj = _objective(student)
    emb = student[0].auto_model.get_input_embeddings()
    assert obj.decoder.output.weight is emb.weight
    assert obj.decoder.memory.in_features == student.get_embedding_dimension()
    ids = [id(p) for p in obj.parameters()]
    assert len(ids) == len(set(ids)), "the tied weight is counted twice"
    state = obj.state_dict()
    assert "decoder.arch" in state and any(k.startswith("decoder.layers.layers.1.") for k in state)
    assert obj.decoder.arch.tolist() == [2, 4, obj.max_seq_length]
    head = obj.head_state()
    assert "decoder.output.bias" in head and "decoder.output.weight" not in head
    assert not any(k.startswith("student.") for k in head)
    assert not any("decoder" in k for k in student.state_dict())
    with pytest.raises(ValueError, match="divisible"):
        _objective(student, decoder_heads=5)


def test_decoder_is_causal() -> None:
    """Changing the target token at position t changes the logits at t and after, never before."""
    torch.manual_seed(0)
    decoder = SentenceDecoder(16, torch.nn.Parameter(torch.randn(50, 32)), 2, 4, 20, dropout=0.0).eval()
    vectors, ids = torch.randn(3, 16), torch.randint(0, 50, (3, 9))
    changed = ids.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 50
    with torch.no_grad():
        a, b = decoder(vectors, ids), decoder(vectors, changed)
    assert torch.equal(a[:, :5], b[:, :5])
    assert (a[:, 5:] - b[:, 5:]).abs().max() > 1e-3


def _perturb_token_states(student: SentenceTransformer, keep_mean: bool):
    """Forward hook on the transformer module: add ±d at the first two real tokens of every sentence
    (mean over real tokens unchanged) or +d at the first token only (mean changed)."""

    def hook(_module, _inputs, output):  # type: ignore[no-untyped-def]
        states = output["token_embeddings"]
        delta = torch.zeros_like(states)
        delta[:, 0] = 3.0
        if keep_mean:
            delta[:, 1] = -3.0
        output["token_embeddings"] = states + delta
        return output

    return student[0].register_forward_hook(hook)


def test_decoder_sees_only_the_sentence_vector(student: SentenceTransformer) -> None:
    obj = _objective(student)
    obj.eval()
    batch = obj.collate(PAIRS)
    targets = batch["targets"]
    with torch.no_grad():
        vectors = obj.embed(batch["features"])
        logits = obj.decoder(vectors, targets["input_ids"], targets["attention_mask"])
        loss = obj(batch)["loss"]
    for keep_mean in (True, False):
        handle = _perturb_token_states(student, keep_mean)
        try:
            with torch.no_grad():
                v2 = obj.embed(batch["features"])
                logits2 = obj.decoder(v2, targets["input_ids"], targets["attention_mask"])
                loss2 = obj(batch)["loss"]
        finally:
            handle.remove()
        if keep_mean:  # token states changed, pooled vector not: the decoder cannot tell
            assert torch.allclose(v2, vectors, atol=1e-6)
            torch.testing.assert_close(logits2, logits, rtol=0, atol=1e-5)
            assert loss2.item() == pytest.approx(loss.item(), abs=1e-5)
        else:  # the pooled vector moved: so do the logits
            assert (logits2 - logits).abs().max() > 1e-3
            assert abs(loss2.item() - loss.item()) > 1e-4


def test_each_direction_is_conditioned_on_the_other_sides_vector(student: SentenceTransformer) -> None:
    obj = _objective(student)
    obj.eval()
    batch = obj.collate(PAIRS)
    n = len(PAIRS)
    ids, attn = batch["targets"]["input_ids"], batch["targets"]["attention_mask"]
    with torch.no_grad():
        out = obj(batch)
        v = obj.embed(batch["features"])
        for key, vec, rows in (
            ("translate_ab", v[:n], slice(n, 2 * n)),
            ("translate_ba", v[n:], slice(0, n)),
        ):
            logp = F.log_softmax(obj.decoder(vec, ids[rows, :-1], attn[rows, :-1]).double(), dim=-1)
            gold, real = ids[rows, 1:], attn[rows, 1:].bool()
            expected = -logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1)[real].mean()
            assert out[key].item() == pytest.approx(expected.item(), rel=1e-5)
    assert out["translate"].item() == pytest.approx((out["translate_ab"] + out["translate_ba"]).item() / 2)


def test_teacher_forcing_loss_by_hand_on_a_tiny_vocabulary(student: SentenceTransformer) -> None:
    """Zero the decoder's final LayerNorm: every state is 0, so the logits are the output bias b and
    each token costs log Σ_v exp(b_v) − b_gold, computed here with the math module."""
    obj = _objective(student, autoencode_weight=0.5, sentence_mse_weight=2.0, koleo_weight=0.1)
    obj.eval()
    vocab = obj.decoder.output.bias.shape[0]
    bias = [math.sin(0.7 * i) * 2.0 for i in range(vocab)]
    with torch.no_grad():
        obj.decoder.layers.norm.weight.zero_()
        obj.decoder.layers.norm.bias.zero_()
        obj.decoder.output.bias.copy_(torch.tensor(bias))
    pairs = PAIRS[:2]
    batch = obj.collate(pairs)
    with torch.no_grad():
        out = obj(batch)
        v = obj.embed(batch["features"])
    lse = math.log(sum(math.exp(b) for b in bias))
    ids, attn = batch["targets"]["input_ids"].tolist(), batch["targets"]["attention_mask"].tolist()

    def side_mean(rows: range) -> float:
        costs = [lse - bias[ids[r][t]] for r in rows for t in range(1, len(ids[r])) if attn[r][t]]
        return sum(costs) / len(costs)

    a, b = side_mean(range(0, 2)), side_mean(range(2, 4))
    assert out["translate_ba"].item() == pytest.approx(a, rel=1e-5)  # A generated from B's vector
    assert out["translate_ab"].item() == pytest.approx(b, rel=1e-5)
    assert out["translate"].item() == pytest.approx((a + b) / 2, rel=1e-5)
    assert out["autoencode"].item() == pytest.approx((a + b) / 2, rel=1e-5)  # same targets, own vector
    align = F.mse_loss(v[:2], v[2:]).item()
    assert out["sentence_mse"].item() == pytest.approx(align, rel=1e-5)
    total = 1.5 * (a + b) / 2 + 2.0 * align + 0.1 * out["koleo"].item()
    assert out["loss"].item() == pytest.approx(total, rel=1e-5)


def _fit(obj: BottleneckObjective, batch: dict, steps: int = 150) -> list[float]:
    """``steps`` AdamW steps (lr 3e-3) on one batch; the losses."""
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=3e-3)
    losses = []
    for _ in range(steps):
        out = obj(batch)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        losses.append(out["loss"].item())
    return losses


# ---------------------------------------------------------------------------------------------- overfit
@pytest.fixture(scope="module")
def overfit(tiny_nodrop_dir: Path) -> tuple[BottleneckObjective, list[ParallelPair], list[float]]:
    """The tiny student and a 2-layer decoder trained on 50 pairs (one batch) for 150 steps."""
    student = _tiny(tiny_nodrop_dir)
    obj = _objective(student)
    pairs = _fifty_pairs()
    batch = obj.collate(pairs)
    losses = _fit(obj, batch)
    return obj, pairs, losses


def test_loss_falls_on_a_50_pair_overfit(overfit) -> None:
    _, _, losses = overfit
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < 0.25 * losses[0], (losses[0], losses[-1])


def test_greedy_decoding_after_overfit_reproduces_training_targets(overfit) -> None:
    obj, pairs, _ = overfit
    student = obj.student
    decoded = greedy_decode(obj, student, [p.src for p in pairs], max_len=12)
    expected = [_round_trip(student, p.tgt) for p in pairs]
    exact = sum(d == e for d, e in zip(decoded, expected, strict=True))
    assert exact >= 1, list(zip(decoded[:5], expected[:5], strict=True))
    # the function takes the decoder alone too, and leaves the modules' modes as they were
    obj.train()
    assert greedy_decode(obj.decoder, student, [pairs[0].src], max_len=12) == decoded[:1]
    assert obj.decoder.training and student.training
    assert greedy_decode(obj, student, [], max_len=12) == []


def test_decode_cli_rebuilds_the_decoder_from_a_checkpoint(overfit, tmp_path: Path, capsys) -> None:
    obj, pairs, _ = overfit
    student = obj.student
    model_dir, ckpt = tmp_path / "model", tmp_path / "out" / "checkpoints" / "step-00000150"
    ckpt.mkdir(parents=True)
    student.save(str(model_dir))
    torch.save({"objective": obj.state_dict(), "step": 150}, ckpt / "state.pt")
    texts = [p.src for p in pairs[:4]]
    expected = greedy_decode(obj, student, texts, max_len=12)
    assert (
        cli_main(["decode", str(model_dir), "--checkpoint", str(ckpt), *texts, "--max-new-tokens", "12"]) == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [f"{t}\t->\t{e}" for t, e in zip(texts, expected, strict=True)]
    # an output folder resolves to its newest checkpoint; a folder without one is a clear error
    assert cli_main(["decode", str(model_dir), "--checkpoint", str(tmp_path / "out"), texts[0]]) == 0
    assert capsys.readouterr().out.strip() == lines[0].split("\t->")[0] + "\t->\t" + expected[0]
    assert cli_main(["decode", str(model_dir), "--checkpoint", str(tmp_path), texts[0]]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_load_decoder_from_a_composite_checkpoint(
    student: SentenceTransformer, tiny_nodrop_dir: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(0)
    table: dict[str, np.ndarray] = {}

    def teacher(texts):  # type: ignore[no-untyped-def]
        return np.stack([table.setdefault(t, rng.standard_normal(32).astype(np.float32)) for t in texts])

    bottleneck = _objective(student, seed=3)
    comp = CompositeObjective(
        {"bottleneck": bottleneck, "distill": DistillationObjective(student, teacher)}, [1.0, 0.5]
    )
    out = comp(comp.collate(PAIRS))
    assert out["loss"].item() == pytest.approx(
        out["bottleneck/loss"].item() + 0.5 * out["distill/loss"].item(), rel=1e-5
    )
    out["loss"].backward()
    assert float(sum(p.grad.abs().sum() for p in bottleneck.decoder.layers.parameters())) > 0
    torch.save({"objective": comp.state_dict()}, tmp_path / "state.pt")
    fresh = _tiny(tiny_nodrop_dir)
    decoder = load_decoder(fresh, tmp_path / "state.pt")
    for key, value in bottleneck.decoder.state_dict().items():
        torch.testing.assert_close(decoder.state_dict()[key], value)
    texts = [p.src for p in PAIRS]
    assert greedy_decode(decoder, fresh, texts, 8) == greedy_decode(bottleneck, student, texts, 8)


# ---------------------------------------------------------------------------------------------- target vocabulary
def test_target_vocab_is_unk_bos_eos_then_the_most_frequent_target_ids(student: SentenceTransformer) -> None:
    tok = student.tokenizer
    pairs = _fifty_pairs()
    vocab = target_vocab(student, pairs, 8).tolist()
    assert vocab[:3] == [tok.unk_token_id, tok.cls_token_id, tok.sep_token_id]
    counts: dict[int, int] = {}
    for p in pairs:
        for text in (p.src, p.tgt):
            for i in tok(text, add_special_tokens=False)["input_ids"]:
                counts[i] = counts.get(i, 0) + 1
    by_freq = sorted(counts, key=lambda i: (-counts[i], i))
    assert vocab[3:] == by_freq[:5]
    # counted from evenly spaced pairs only when asked; capped by what occurs
    assert target_vocab(student, pairs, 8, max_pairs=25).tolist()[:3] == vocab[:3]
    assert len(target_vocab(student, pairs[:1], 500)) == 3 + len(
        set(tok(pairs[0].src + " " + pairs[0].tgt, add_special_tokens=False)["input_ids"])
    )
    with pytest.raises(ValueError, match="> 3"):
        target_vocab(student, pairs, 3)
    with pytest.raises(ValueError, match="training pairs"):
        target_vocab(student, [], 10)


def test_restricted_vocabulary_loss_by_hand_with_unk(student: SentenceTransformer) -> None:
    """With a restricted vocabulary the softmax covers its rows only and every target token outside it
    costs as <unk> (decoder id 0): zeroed final LayerNorm, logits = the decoder's own bias."""
    tok = student.tokenizer
    vocab = target_vocab(student, _fifty_pairs(), 9)
    obj = _objective(student, decoder_vocab=vocab)
    obj.eval()
    assert obj.decoder.output.weight is student[0].auto_model.get_input_embeddings().weight  # still tied
    assert obj.decoder.vocab_size == 9 and obj.decoder.output.bias.shape == (9,)
    assert "decoder.vocab_ids" in obj.head_state()
    bias = [math.cos(0.9 * i) * 1.5 for i in range(9)]
    with torch.no_grad():
        obj.decoder.layers.norm.weight.zero_()
        obj.decoder.layers.norm.bias.zero_()
        obj.decoder.output.bias.copy_(torch.tensor(bias))
    pairs = PAIRS[:2]  # "of", "is", "good", "von", ... are not among the 6 most frequent: <unk>
    batch = obj.collate(pairs)
    with torch.no_grad():
        out = obj(batch)
    small = {t: i for i, t in enumerate(vocab.tolist())}
    lse = math.log(sum(math.exp(b) for b in bias))
    ids, attn = batch["targets"]["input_ids"].tolist(), batch["targets"]["attention_mask"].tolist()
    unk_seen = 0

    def side_mean(rows: range) -> float:
        nonlocal unk_seen
        gold = [small.get(ids[r][t], 0) for r in rows for t in range(1, len(ids[r])) if attn[r][t]]
        unk_seen += gold.count(0)
        return sum(lse - bias[g] for g in gold) / len(gold)

    a, b = side_mean(range(0, 2)), side_mean(range(2, 4))
    assert unk_seen > 0 and tok.unk_token_id not in sum(ids, [])
    assert out["translate_ba"].item() == pytest.approx(a, rel=1e-5)
    assert out["translate_ab"].item() == pytest.approx(b, rel=1e-5)
    assert math.isfinite(out["loss"].item())
    # the mapping round-trips: in-vocabulary ids come back, others come back as <unk>
    dec = obj.decoder
    full = torch.tensor([vocab[5].item(), tok.sep_token_id, tok.convert_tokens_to_ids("von")])
    assert dec.to_tokenizer(dec.from_tokenizer(full)).tolist() == [
        vocab[5].item(),
        tok.sep_token_id,
        tok.unk_token_id,
    ]


def test_restricted_vocabulary_overfit_decodes_targets_through_the_mapping(tiny_nodrop_dir: Path) -> None:
    """Every token of these 50 targets is in the 40-id vocabulary: after overfitting, greedy decoding
    (decoder ids mapped back to the tokenizer's) reproduces training targets exactly."""
    student = _tiny(tiny_nodrop_dir)
    pairs = _fifty_pairs()
    vocab = target_vocab(student, pairs, 40)
    used = {i for p in pairs for t in (p.src, p.tgt) for i in student.tokenizer(t)["input_ids"]}
    assert used <= set(vocab.tolist())
    obj = _objective(student, decoder_vocab=vocab)
    batch = obj.collate(pairs)
    losses = _fit(obj, batch)
    assert all(math.isfinite(x) for x in losses) and losses[-1] < 0.25 * losses[0]
    decoded = greedy_decode(obj, student, [p.src for p in pairs], max_len=12)
    expected = [_round_trip(student, p.tgt) for p in pairs]
    assert sum(d == e for d, e in zip(decoded, expected, strict=True)) >= 1, list(
        zip(decoded[:5], expected[:5], strict=True)
    )


# ---------------------------------------------------------------------------------------------- trainer
@pytest.mark.parametrize("decoder_vocab", [0, 20])
def test_bottleneck_resume_equals_uninterrupted_run(
    decoder_vocab, tiny_teacher_dir, tiny_model_dir, tmp_path, capsys
) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    kw = dict(
        objective="bottleneck",
        decoder_layers=1,
        decoder_heads=2,
        save_every=2,
        max_steps=6,
        decoder_vocab=decoder_vocab,
    )
    full = train(tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_model_dir, corpus, **kw))
    short = train(tiny_config(tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, **kw))
    assert short.steps == 6
    # cut run b back to its step-2 checkpoint (as if killed right after writing it) and resume
    for ckpt in list_checkpoints(tmp_path / "b" / "out")[1:]:
        shutil.rmtree(ckpt)
    cfg = tiny_config(tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, **kw)
    resumed = train(TrainConfig(**{**cfg.__dict__, "resume": True}))
    assert resumed.steps == 6
    state = load_latest(full.output)[1]["objective"]
    assert "decoder.arch" in state and "decoder.layers.layers.0.multihead_attn.in_proj_weight" in state
    _assert_same_weights(full.output, resumed.output)
    # the decoder trains: its weights differ between the kept checkpoints (steps 4 and 6)
    step4, step6 = (load_state(c) for c in list_checkpoints(full.output))
    key = "decoder.layers.layers.0.linear1.weight"
    assert not torch.equal(step4["objective"][key], step6["objective"][key])
    if decoder_vocab:  # the target vocabulary is in the checkpoint; `babelspace decode` rebuilds it
        assert step6["objective"]["decoder.vocab_ids"].shape == (decoder_vocab,)
        assert step6["objective"]["decoder.output.bias"].shape == (decoder_vocab,)
    else:
        assert "decoder.vocab_ids" not in step6["objective"]
    model = SentenceTransformer(str(full.output), device="cpu")
    decoder = load_decoder(model, list_checkpoints(full.output)[-1] / "state.pt")
    assert decoder.vocab_size == (decoder_vocab or model[0].auto_model.get_input_embeddings().num_embeddings)
    assert decoder.languages == ("de", "en")  # the training pairs' languages, kept in the checkpoint
    texts = ["the king", "god land"]
    args = ["decode", str(full.output), "--checkpoint", str(full.output), "--tgt-lang", "de", *texts]
    assert cli_main(args) == 0
    lines = capsys.readouterr().out.splitlines()  # not stripped: a decode may be empty
    decoded = greedy_decode(decoder, model, texts, tgt_lang="de")
    assert lines == [f"{t}\t->\t{d}" for t, d in zip(texts, decoded, strict=True)]

    # the export is a plain sentence-transformers model without the decoder
    exported = SentenceTransformer(str(full.output), device="cpu")
    assert not any("decoder" in k for k in exported.state_dict())
    original = SentenceTransformer(str(tiny_model_dir), device="cpu")
    assert exported.state_dict().keys() == original.state_dict().keys()
    assert np.isfinite(exported.encode(["the king"])).all()


@pytest.mark.parametrize("objective", ["bottleneck+distill", "bottleneck+mexma"])
def test_compositions_train_through_the_loop(objective, tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    cfg = tiny_config(
        tmp_path,
        tiny_teacher_dir,
        tiny_model_dir,
        corpus,
        objective=objective,
        decoder_layers=1,
        decoder_heads=2,
        head_layers=1,
        head_heads=2,
        autoencode_weight=0.5,
        sentence_mse_weight=1.0,
        max_steps=4,
        save_every=4,
    )
    res = train(cfg)
    assert res.steps == 4
    state = load_latest(cfg.output)[1]["objective"]
    assert "objectives.bottleneck.decoder.arch" in state
    model = SentenceTransformer(str(res.output), device="cpu")
    assert not any("decoder" in k for k in model.state_dict())
    assert np.isfinite(model.encode(["the king"])).all()


# ---------------------------------------------------------------------------------------------- e5-small
@pytest.mark.slow
def test_bottleneck_on_e5_small_lowers_the_loss(e5_small_path: Path) -> None:
    torch.manual_seed(0)
    student = SentenceTransformer(str(e5_small_path), device="cpu")
    student.max_seq_length = 32
    obj = BottleneckObjective(
        student, decoder_layers=2, decoder_heads=4, autoencode_weight=0.5, sentence_mse_weight=1.0
    )
    assert obj.decoder.output.weight is student[0].auto_model.get_input_embeddings().weight
    assert (obj.bos_id, obj.eos_id) == (student.tokenizer.bos_token_id, student.tokenizer.eos_token_id)
    pairs = [ParallelPair(en, de, "en", "de", f"b:{i}") for i, (en, de) in enumerate(BIBLE_PAIRS[:4])]
    batch = obj.collate(pairs)
    # the decoder targets carry no prompt; the encoder input does (e5's "query: ")
    assert batch["targets"]["input_ids"].shape[1] < batch["features"]["input_ids"].shape[1]
    # keep the 96M-parameter embedding matrix fixed (its dense update dominates a CPU step)
    student[0].auto_model.get_input_embeddings().weight.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=3e-4)
    obj.eval()
    with torch.no_grad():
        first = obj(batch)
    obj.train()
    for _ in range(6):
        opt.zero_grad()
        obj(batch)["loss"].backward()
        torch.nn.utils.clip_grad_norm_(obj.parameters(), 1.0)
        opt.step()
    obj.eval()
    with torch.no_grad():
        last = obj(batch)
    assert torch.isfinite(last["loss"])
    assert last["translate"] < first["translate"], (first["translate"], last["translate"])
    assert last["loss"] < first["loss"]
    assert len(greedy_decode(obj, student, [pairs[0].src], max_len=5)) == 1


# ---------------------------------------------------------------------------------------------- torchrun
@pytest.mark.slow
def test_torchrun_two_gloo_processes_equal_one_process(tiny_nodrop_dir: Path, tmp_path: Path) -> None:
    """`torchrun --nproc_per_node 2 -m babelspace train --objective bottleneck` (CPU, gloo): the token
    mean of the CE is over both processes' tokens and KoLeo over both processes' vectors
    (--gather-negatives), so two processes with half a batch each equal one process with all of it,
    restricted target vocabulary, auto-encoding and alignment included (plain auto-encoding: the
    denoising draws are per process, so they differ from one process's by design)."""
    corpus = write_corpus(tmp_path / "pairs.tsv")
    common = [
        "train", "--objective", "bottleneck", "--student", str(tiny_nodrop_dir), "--data", str(corpus),
        "--tgt-lang", "de", "--batch-size", "8", "--max-steps", "6", "--eval-every", "3", "--lr", "1e-3",
        "--dev-pairs", "16", "--max-seq-length", "16", "--cache-dir", str(tmp_path / "cache"),
        "--test-sentences", "0", "--seed", "3", "--save-every", "6", "--threads", "1",
        "--decoder-layers", "1", "--decoder-heads", "2", "--decoder-dropout", "0", "--decoder-vocab", "30",
        "--autoencode-weight", "0.5", "--denoise-ratio", "0", "--sentence-mse-weight", "1", "--koleo-weight", "0.1",
        "--gather-negatives",
        "--device", os.environ.get("BABELSPACE_TEST_DEVICE", "cpu"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = tmp_path / "two"
    run_two_processes("-m", "babelspace", *common, "--out", str(two))
    one = tmp_path / "one"
    alone = subprocess.run(
        [sys.executable, "-m", "babelspace", *common, "--out", str(one)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert alone.returncode == 0, alone.stderr[-4000:]
    a, b = load_latest(one)[1]["objective"], load_latest(two)[1]["objective"]
    assert "decoder.vocab_ids" in b and a.keys() == b.keys()
    for key in a:
        x, y = a[key], b[key]
        if key.endswith("in_proj_bias"):
            # The key bias adds the same q·b to every attention score of a query: softmax ignores it, so
            # its true gradient is 0 and Adam turns float noise (different in 1 and 2 processes) into
            # steps. Measured: up to 2e-5 apart there, everything else within 1e-6.
            width = x.shape[0] // 3
            torch.testing.assert_close(x[width : 2 * width], y[width : 2 * width], rtol=0, atol=1e-3)
            x, y = torch.cat([x[:width], x[2 * width :]]), torch.cat([y[:width], y[2 * width :]])
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5, msg=key)
