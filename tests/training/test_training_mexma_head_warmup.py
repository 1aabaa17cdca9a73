"""MEXMA's head warm-up through the trainer: the encoder does not move during it, and a run resumed
from a checkpoint inside the warm-up ends with the weights of the uninterrupted run (two optimizer
groups, the encoder's schedule joining at the warm-up's end)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer

from babelspace.checkpoints.checkpoint import list_checkpoints, load_state
from babelspace.training.config import TrainConfig
from babelspace.training.trainer import train

EN = "the a god lord king people land house city day cat dog".split()
DE = "der die gott herr könig volk haus stadt tag katze".split()


def _corpus(path: Path, n: int = 120) -> Path:
    rng = random.Random(0)
    lines: dict[str, str] = {}
    while len(lines) < n:
        idx = [rng.randrange(len(DE)) for _ in range(rng.randint(2, 6))]
        lines.setdefault(" ".join(EN[i] for i in idx), " ".join(DE[i] for i in idx))
    path.write_text("".join(f"{s}\t{t}\n" for s, t in lines.items()))
    return path


def _config(root: Path, student: Path, corpus: Path, **kw) -> TrainConfig:
    base = dict(
        objective="mexma",
        student=str(student),
        data=[str(corpus)],
        tgt_lang="de",
        batch_size=8,
        max_steps=6,
        eval_every=6,
        lr=1e-3,
        head_lr=3e-3,
        head_warmup_steps=3,
        head_layers=1,
        head_heads=2,
        dev_pairs=16,
        max_seq_length=16,
        output=root / "out",
        cache_dir=root / "cache",
        test_sentences=0,
        seed=3,
        save_every=2,
        keep_last=3,
        model_from="final",
    )
    return TrainConfig(**{**base, **kw})


def _objective_state(path: Path) -> dict[str, torch.Tensor]:
    return load_state(path)["objective"]


def test_encoder_is_still_during_the_warmup_and_a_resumed_run_matches(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    corpus = _corpus(tmp_path / "pairs.tsv")
    full = train(_config(tmp_path / "a", tiny_model_dir, corpus))
    assert full.steps == 6
    step2, step4, step6 = list_checkpoints(full.output)
    at2, at6 = _objective_state(step2), _objective_state(step6)
    student = SentenceTransformer(str(tiny_model_dir), device="cpu")
    loaded = {f"student.{k}": v for k, v in student.state_dict().items()}
    encoder = [k for k in at2 if k.startswith("student.") and k in loaded]
    head = [k for k in at2 if k.startswith("head.")]
    assert encoder and head
    for key in encoder:  # two steps into the 3-step warm-up: the encoder (embeddings too) as loaded
        torch.testing.assert_close(at2[key], loaded[key], rtol=0.0, atol=0.0)
    assert any(not torch.equal(at2[k], at6[k]) for k in encoder)  # it trains once it has joined
    assert any(not torch.equal(at2[k], at6[k]) for k in head)
    # a run cut back to its step-2 checkpoint (inside the warm-up) and resumed ends where the full one does
    cut = tmp_path / "b"
    train(_config(cut, tiny_model_dir, corpus))
    for ckpt in list_checkpoints(cut / "out")[1:]:
        shutil.rmtree(ckpt)
    resumed = train(_config(cut, tiny_model_dir, corpus, resume=True))
    assert resumed.steps == 6
    a, b = at6, _objective_state(list_checkpoints(resumed.output)[-1])
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0.0, atol=1e-6)
