"""MEXMA's head warm-up (``head_warmup_steps``, ``head_lr``), the batch-vocabulary unmasking softmax
(``unmask_vocab="batch"``) and the renamed sentence-MSE settings, on the tiny test model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.errors import TrainingError
from babelspace.objectives.mexma import MexmaObjective, make_mexma_student
from babelspace.objectives.parts.masking import IGNORE_INDEX
from babelspace.training.config import TrainConfig
from babelspace.training.recipes import apply_recipe
from babelspace.training.setup.phases import joining_schedule, lr_schedule, make_optimizer, split_head_params

PAIRS = [
    ParallelPair("the king of the land", "der könig von dem land", "en", "de", "t:1"),
    ParallelPair("god is good", "gott ist gut", "en", "de", "t:2"),
    ParallelPair(
        "the people in the city and the house", "das volk in der stadt und das haus", "en", "de", "t:3"
    ),
    ParallelPair("one day with the lord", "ein tag mit dem herr", "en", "de", "t:4"),
]


@pytest.fixture()
def student(tiny_model_dir: Path) -> SentenceTransformer:
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    vocab = tiny_model_dir.parent / "hf" / "vocab.txt"
    if len(model.tokenizer) < 10 and vocab.exists():
        from transformers import BertTokenizer

        model[0].processor = BertTokenizer(vocab=str(vocab), do_lower_case=True)
    return make_mexma_student(model)


def _objective(student: SentenceTransformer, **kwargs) -> MexmaObjective:
    torch.manual_seed(0)
    return MexmaObjective(
        student, head_layers=1, head_heads=2, generator=torch.Generator().manual_seed(0), **kwargs
    )


def _grads(obj: MexmaObjective) -> tuple[float, float]:
    """Summed |grad| of the student's parameters and of the head's own."""
    own = {id(p) for p in obj.student.parameters()}
    enc = sum(float(p.grad.abs().sum()) for p in obj.student.parameters() if p.grad is not None)
    head = sum(float(p.grad.abs().sum()) for p in obj.parameters() if id(p) not in own and p.grad is not None)
    return enc, head


def test_head_warmup_trains_the_head_alone_then_everything(student: SentenceTransformer) -> None:
    obj = _objective(student, head_warmup_steps=2)
    obj.train()
    assert (
        not obj.head_only
    )  # only the trainer's begin_step starts the warm-up (a loop without it trains all)
    batch = obj.collate(PAIRS)
    obj.begin_step(1)  # inside the warm-up
    out = obj(batch)
    assert out["loss"].item() == pytest.approx(out["ce"].item(), rel=1e-6)  # the unmasking loss alone
    out["loss"].backward()
    enc, head = _grads(obj)
    assert enc == 0.0 and head > 0.0  # no gradient into the encoder, the tied embeddings included
    obj.zero_grad(set_to_none=True)
    obj.begin_step(2)  # the joint phase
    out = obj(batch)
    full = out["ce"] + out["sentence_mse"] + 0.01 * out["koleo"]
    assert out["loss"].item() == pytest.approx(full.item(), rel=1e-5)
    out["loss"].backward()
    enc, head = _grads(obj)
    assert enc > 0.0 and head > 0.0


def test_batch_vocab_softmax_equals_the_full_logits_restricted_to_the_batch_ids(
    student: SentenceTransformer,
) -> None:
    full, batch_vocab = _objective(student), _objective(student, unmask_vocab="batch")
    batch_vocab.load_state_dict(full.state_dict())
    full.eval()
    batch_vocab.eval()
    batch = full.collate(PAIRS)
    with torch.no_grad():
        states = full.token_states(batch["masked"])
        clean = full.token_states(batch["clean"])[:, 0]
        n = len(PAIRS)
        context = torch.cat([clean[n:], clean[:n]])
        labels, attn = batch["labels"], batch["clean"]["attention_mask"]
        logits = full.unmasking_logits(states, context, attn, labels)
        vocab = torch.unique(batch["clean"]["input_ids"])
        targets = torch.searchsorted(vocab, labels[labels != IGNORE_INDEX])
        expected = F.cross_entropy(logits[:, vocab], targets)
        assert len(vocab) < logits.shape[1]
        out = batch_vocab(batch)
        ref = full(batch)
    # the two sides' means averaged: the same tokens, so compare against the per-side oracle
    side_a = torch.nonzero(labels != IGNORE_INDEX)[:, 0] < n
    token_ce = F.cross_entropy(logits[:, vocab], targets, reduction="none")
    oracle = 0.5 * (token_ce[side_a].mean() + token_ce[~side_a].mean())
    assert out["ce"].item() == pytest.approx(oracle.item(), rel=1e-5)
    assert out["ce"].item() < ref["ce"].item()  # fewer candidates: a smaller loss than the full softmax
    assert expected.item() > 0


def test_config_rejects_head_options_without_mexma_and_a_warmup_as_long_as_the_run() -> None:
    with pytest.raises(TrainingError, match="--head-warmup-steps"):
        TrainConfig(objective="distill", head_warmup_steps=5)
    with pytest.raises(TrainingError, match="--head-lr"):
        TrainConfig(objective="contrastive", head_lr=1e-3)
    with pytest.raises(TrainingError, match=r"fewer than --max-steps \(10\)"):
        TrainConfig(objective="mexma", head_warmup_steps=10, max_steps=10)
    assert TrainConfig(objective="mexma", head_warmup_steps=9, max_steps=10).head_warmup_steps == 9


def test_mexma_paper_recipe_has_no_head_warmup_and_the_paper_vocabulary() -> None:
    cfg = apply_recipe("mexma-paper", {})
    assert cfg.head_warmup_steps == 0 and cfg.head_lr is None and cfg.unmask_vocab == "full"
    assert cfg.sentence_mse_for("mexma") == 1.0


def test_sentence_mse_weight_defaults_per_objective() -> None:
    cfg = TrainConfig(objective="mexma")
    assert cfg.sentence_mse_for("mexma") == 1.0 and cfg.sentence_mse_for("bottleneck") == 0.0
    cfg = TrainConfig(objective="mexma", sentence_mse_weight=0.5)
    assert cfg.sentence_mse_for("mexma") == 0.5 and cfg.sentence_mse_for("bottleneck") == 0.5


def test_joining_schedule_is_zero_then_its_own_warmup_and_decay() -> None:
    cfg = TrainConfig(objective="mexma", max_steps=30, warmup=4, head_warmup_steps=10)
    join, whole = joining_schedule(cfg, 30, 10), lr_schedule(cfg, 20)
    assert [join(s) for s in range(10)] == [0.0] * 10
    assert [join(s) for s in range(10, 30)] == [whole(s) for s in range(20)]
    assert join(10) == 0.0 and join(14) == pytest.approx(1.0)  # the encoder's own warm-up from 0


def test_optimizer_puts_the_head_in_its_own_group_at_head_lr(student: SentenceTransformer) -> None:
    cfg = TrainConfig(objective="mexma", max_steps=20, lr=1e-4, head_lr=1e-3, head_warmup_steps=5, warmup=2)
    obj = _objective(student)
    enc, head = split_head_params(obj, student, cfg)
    assert head and {id(p) for p in enc} == {id(p) for p in student.parameters() if p.requires_grad}
    # the tied output weight is the student's word embeddings: in the student's group, once
    assert obj.head.output.weight is student[0].auto_model.get_input_embeddings().weight
    assert all(p is not obj.head.output.weight for p in head)
    optimizer, scheduler = make_optimizer(enc, cfg, 20, head)
    assert [g["lr"] for g in optimizer.param_groups] == [0.0, pytest.approx(0.0)]  # both warm up from 0
    for _ in range(6):
        optimizer.step()
        scheduler.step()
    enc_lr, head_lr = (g["lr"] for g in optimizer.param_groups)
    assert enc_lr == pytest.approx(1e-4 * 1 / 2)  # joined at step 5, one step into its 2-step warm-up
    assert head_lr == pytest.approx(1e-3 * (20 - 6) / (20 - 2))  # past its warm-up, decaying linearly
    no_split = TrainConfig(objective="mexma", max_steps=20)
    assert split_head_params(obj, student, no_split)[1] is None


def test_default_recipe_gives_mexma_its_cpu_regime_and_flags_still_win() -> None:
    cfg = apply_recipe("babelspace", {"objective": "mexma"})
    assert cfg.recipe == "mexma-cpu"
    assert (cfg.head_warmup_steps, cfg.head_lr, cfg.unmask_vocab, cfg.head_layers) == (20, 5e-4, "batch", 1)
    assert (cfg.max_steps, cfg.lr, cfg.sentence_mse_for("mexma"), cfg.koleo_for("mexma")) == (
        60,
        5e-5,
        100.0,
        1.0,
    )
    cfg = apply_recipe("babelspace", {"objective": "mexma", "head_warmup_steps": 0, "max_steps": 10})
    assert cfg.head_warmup_steps == 0 and cfg.max_steps == 10
    assert apply_recipe("mexma-paper", {"objective": "mexma"}).recipe == "mexma-paper"
    assert apply_recipe("babelspace", {"objective": "mexma+distill"}).recipe == "babelspace"
    assert apply_recipe("babelspace", {}).head_warmup_steps == 0


def test_card_names_the_cpu_options_as_deviations() -> None:
    from babelspace.training.output.card_sections import limitations_section
    from babelspace.training.output.model_card import objective_deviations

    cfg = apply_recipe("babelspace", {"objective": "mexma"}).to_dict()
    lines = objective_deviations(cfg)
    assert len(lines) == 3 and "--unmask-vocab batch" in lines[0] and "first 20 steps" in lines[1]
    assert "--sentence-mse-weight 100 --koleo-weight 1" in lines[2] and "1 and 0.01" in lines[2]
    paper_weights = apply_recipe(
        "babelspace", {"objective": "mexma", "sentence_mse_weight": 1.0, "koleo_weight": 0.01}
    )
    assert len(objective_deviations(paper_weights.to_dict())) == 2
    assert objective_deviations(apply_recipe("mexma-paper", {}).to_dict()) == []
    assert objective_deviations(TrainConfig().to_dict()) == []
    text = limitations_section([], ["en"], {"deviations": lines})
    assert "- Deviation from the paper: MEXMA's unmasking softmax" in text


def test_a_default_mexma_run_says_at_its_start_which_regime_it_runs() -> None:
    from babelspace.training.regimes import regime_warnings

    lines = regime_warnings(apply_recipe("babelspace", {"objective": "mexma"}), 60)
    assert any("CPU regime" in line and "20 steps, then 40 joint steps" in line for line in lines)
    assert any("--sentence-mse-weight 100 --koleo-weight 1;" in line for line in lines)
    assert not any("CPU regime" in line for line in regime_warnings(TrainConfig(), 30))
