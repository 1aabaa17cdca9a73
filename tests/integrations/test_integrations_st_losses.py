"""babelspace's objectives as sentence-transformers losses: the same value as babelspace's own
objective on the same batch, and training under SentenceTransformerTrainer lowers the loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from datasets import Dataset
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
from sentence_transformers.training_args import SentenceTransformerTrainingArguments

from babelspace.data.pairs import ParallelPair
from babelspace.integrations.sentence_transformers.losses import ContrastiveLoss, DistillationLoss, MexmaLoss

SRC = [
    "the king",
    "the city",
    "a big house",
    "god is good",
    "one day",
    "the people",
    "hello world",
    "a small dog",
]
TGT = ["der könig", "die stadt", "ein haus", "gott ist gut", "ein tag", "das volk", "hallo welt", "le chien"]
PAIRS = [ParallelPair(s, t, "en", "de", f"t:{i}") for i, (s, t) in enumerate(zip(SRC, TGT, strict=True))]


def _model(path) -> SentenceTransformer:
    model = SentenceTransformer(str(path), device="cpu")
    model.eval()  # no dropout: the two computations must be the same function
    return model


def _columns(model: SentenceTransformer) -> list[dict[str, torch.Tensor]]:
    return [model.tokenize(SRC), model.tokenize(TGT)]


def _teacher(dim: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((len(SRC), dim)).astype(np.float32)


def test_distillation_loss_equals_the_objective(tiny_model_dir) -> None:
    from babelspace.objectives.distillation import DistillationObjective as Objective

    model = _model(tiny_model_dir)
    teacher = _teacher(model.get_sentence_embedding_dimension())
    bank = _teacher(model.get_sentence_embedding_dimension())[::-1].copy()
    lookup = dict(zip(SRC, teacher, strict=True))
    own = Objective(
        model, lambda texts: np.stack([lookup[t] for t in texts]), contrast_weight=0.5, contrast_bank=bank
    )
    expected = own(own.collate(PAIRS))["loss"]
    adapter = DistillationLoss(model, contrast_weight=0.5, contrast_bank=bank)
    got = adapter(_columns(model), torch.from_numpy(teacher))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_contrastive_loss_equals_the_objective(tiny_model_dir) -> None:
    from babelspace.objectives.contrastive import ContrastiveObjective

    model = _model(tiny_model_dir)
    expected = ContrastiveObjective(model)(ContrastiveObjective(model).collate(PAIRS))["loss"]
    got = ContrastiveLoss(model)(_columns(model))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_mexma_loss_equals_the_objective(tiny_model_dir) -> None:
    from babelspace.objectives.mexma import MexmaObjective, make_mexma_student

    model = make_mexma_student(_model(tiny_model_dir))
    model.eval()
    torch.manual_seed(0)
    own = MexmaObjective(model, head_layers=1, head_heads=2)
    adapter = MexmaLoss(model, head_layers=1, head_heads=2)
    adapter.objective.head.load_state_dict(own.head.state_dict())
    own.eval(), adapter.eval()
    torch.manual_seed(1)  # the same masks on both sides
    expected = own(own.collate(PAIRS))["loss"]
    torch.manual_seed(1)
    got = adapter(_columns(model))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def _train(model: SentenceTransformer, loss: torch.nn.Module, dataset: Dataset, tmp_path) -> list[float]:
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "st"),
        max_steps=12,
        per_device_train_batch_size=8,
        learning_rate=5e-3,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=0,
        dataloader_drop_last=True,
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss)
    trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


@pytest.mark.parametrize("name", ["distill", "contrastive", "mexma"])
def test_losses_train_under_sentence_transformers_trainer(name, tiny_model_dir, tmp_path) -> None:
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    data = {"src": SRC, "tgt": TGT}
    if name == "distill":
        data["label"] = _teacher(model.get_sentence_embedding_dimension()).tolist()
        loss = DistillationLoss(model)
    elif name == "contrastive":
        loss = ContrastiveLoss(model)
    else:
        from babelspace.objectives.mexma import make_mexma_student

        model = make_mexma_student(model)
        loss = MexmaLoss(model, head_layers=1, head_heads=2)
    losses = _train(model, loss, Dataset.from_dict(data), tmp_path)
    assert len(losses) == 12 and all(np.isfinite(losses))
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
