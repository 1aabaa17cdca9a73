from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.objectives.contrastive import ContrastiveObjective, additive_margin_softmax_loss

PAIRS = [
    ParallelPair("the king of the land", "der könig von dem land", "en", "de", "t:1"),
    ParallelPair("god is good", "gott ist gut", "en", "de", "t:2"),
    ParallelPair("the people in the city", "das volk in der stadt", "en", "de", "t:3"),
    ParallelPair("one day with the lord", "ein tag mit dem herr", "en", "de", "t:4"),
]


@pytest.fixture()
def student(tiny_model_dir: Path) -> SentenceTransformer:
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    vocab = tiny_model_dir.parent / "hf" / "vocab.txt"
    if len(model.tokenizer) < 10 and vocab.exists():
        # transformers 5 ignores ``vocab_file=`` in the fixture's tokenizer: rebuild it from the file.
        from transformers import BertTokenizer

        model[0].processor = BertTokenizer(vocab=str(vocab), do_lower_case=True)
    return model


def _ce(logits: list[float], target: int) -> float:
    return -logits[target] + math.log(sum(math.exp(v) for v in logits))


def test_additive_margin_matches_hand_computation_2x2() -> None:
    a = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    b = torch.tensor([[3.0, 0.0], [1.0, 2.0]])
    s, m = 20.0, 0.3
    c1, c2 = 1 / math.sqrt(5), 2 / math.sqrt(5)
    # cos: [[1, c1], [0, c2]]; positives (diagonal) lose the margin.
    logits = [[s * (1 - m), s * c1], [0.0, s * (c2 - m)]]
    a2b = (_ce(logits[0], 0) + _ce(logits[1], 1)) / 2
    cols = [[logits[0][0], logits[1][0]], [logits[0][1], logits[1][1]]]
    b2a = (_ce(cols[0], 0) + _ce(cols[1], 1)) / 2
    out = additive_margin_softmax_loss(a, b, scale=s, margin=m)
    assert out["src_to_tgt"].item() == pytest.approx(a2b, rel=1e-5)
    assert out["tgt_to_src"].item() == pytest.approx(b2a, rel=1e-5)
    assert out["loss"].item() == pytest.approx((a2b + b2a) / 2, rel=1e-5)
    assert out["accuracy"].item() == pytest.approx(1.0)


def test_margin_raises_loss_and_zero_margin_is_plain_infonce() -> None:
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    plain = additive_margin_softmax_loss(a, b, scale=10.0, margin=0.0)["loss"]
    an, bn = torch.nn.functional.normalize(a, dim=1), torch.nn.functional.normalize(b, dim=1)
    logits = 10.0 * an @ bn.T
    t = torch.arange(6)
    ref = 0.5 * (
        torch.nn.functional.cross_entropy(logits, t) + torch.nn.functional.cross_entropy(logits.T, t)
    )
    assert plain.item() == pytest.approx(ref.item(), rel=1e-5)
    assert additive_margin_softmax_loss(a, b, scale=10.0, margin=0.3)["loss"] > plain


def test_shape_mismatch_raises() -> None:
    with pytest.raises(ValueError):
        additive_margin_softmax_loss(torch.randn(3, 4), torch.randn(2, 4))


def test_contrastive_objective_trains(student: SentenceTransformer) -> None:
    torch.manual_seed(0)
    obj = ContrastiveObjective(student, scale=20.0, margin=0.3)
    batch = obj.collate(PAIRS)
    out = obj(batch)
    assert set(out) >= {"loss", "src_to_tgt", "tgt_to_src", "accuracy", "scale"}
    assert out["scale"].item() == pytest.approx(20.0)
    obj.eval()  # no dropout: deterministic values and a clean before/after comparison
    with torch.no_grad():
        emb = obj.embed(batch["features"])
        ref = additive_margin_softmax_loss(emb[:4], emb[4:], 20.0, 0.3)["loss"]
        first = obj(batch)["loss"].item()
    assert first == pytest.approx(ref.item(), rel=1e-5)
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=1e-3)
    for _ in range(10):
        opt.zero_grad()
        obj(batch)["loss"].backward()
        opt.step()
    assert obj(batch)["loss"].item() < first


def test_learnable_scale_is_a_parameter(student: SentenceTransformer) -> None:
    fixed = ContrastiveObjective(student)
    assert not any(p is fixed.log_scale for p in fixed.parameters())
    learned = ContrastiveObjective(student, scale=10.0, learnable_scale=True)
    assert any(p is learned.log_scale for p in learned.parameters())
    out = learned(learned.collate(PAIRS))
    out["loss"].backward()
    assert learned.log_scale.grad is not None
    assert "log_scale" in learned.head_state()


def test_contrastive_rejects_tiny_batches_and_bad_scale(student: SentenceTransformer) -> None:
    obj = ContrastiveObjective(student)
    with pytest.raises(ValueError):
        obj.collate(PAIRS[:1])
    with pytest.raises(ValueError):
        ContrastiveObjective(student, scale=0.0)


def test_collate_uses_the_current_sentence_transformers_api(student, monkeypatch) -> None:
    """Objectives tokenize through ``preprocess`` (sentence-transformers 6, whose ``tokenize`` is
    a deprecated alias that logs a warning into every run): the same features."""
    from babelspace.models.encoder import tokenize

    pairs = [
        ParallelPair("the king", "der König", "en", "de", "t:0"),
        ParallelPair("a house", "ein Haus", "en", "de", "t:1"),
    ]
    texts = [p.src for p in pairs] + [p.tgt for p in pairs]
    old = student.tokenize(texts)

    def deprecated(*_a, **_k):
        raise AssertionError("the deprecated tokenize was called")

    monkeypatch.setattr(student, "tokenize", deprecated)
    batch = ContrastiveObjective(student).collate(pairs)
    ours = tokenize(student, texts)
    assert all(torch.equal(ours[k], old[k]) for k in old if isinstance(old[k], torch.Tensor))
    assert torch.equal(batch["features"]["input_ids"], ours["input_ids"])
