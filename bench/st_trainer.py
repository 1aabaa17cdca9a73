"""sentence-transformers' trainer with babelspace's distillation loss and batches, against babelspace's
own loop on the same steps.

(a) ``SentenceTransformerTrainer`` + ``DistillationLoss`` (babelspace's objective as an ST loss) +
``balanced_batch_sampler`` (babelspace's balanced, length-bucketed batches as the trainer's
``batch_sampler``), on babelspace's training pairs (``--data``, read as ``babelspace train`` reads
them) with the teacher's vectors from babelspace's teacher cache as labels;
(b) ``babelspace.training.run.run(TrainConfig(...))`` with the same student, data, batch size, steps,
learning rate, seed, gradient clip and schedule (linear decay, no warm-up), fp32.

Both start from one prepared student folder (the projection onto the teacher's dimension drawn once
from the seed, dropout switched off so that the two loops compute the same function) and the plain
regime both loops share: the paper's distillation loss on raw teacher vectors, frozen word
embeddings; babelspace's closed-form projection fit, mean-centred targets, teacher-space
contrastive term and English-side cosine term are switched off, since the ST side does not have them. Prints each step's loss of
both, and the largest difference between their final weights.

    HF_HUB_OFFLINE=1 python bench/st_trainer.py --data bible --langs de,fr --max-pairs 2000 --steps 20
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def parity_config(out: Path, **options: Any):
    """The ``TrainConfig`` both loops follow: ``options`` (data, teacher, student, batch size, steps,
    lr, seed, ...) on top of the regime the ST side reproduces."""
    from babelspace.training.config import TrainConfig

    fixed = dict(
        warmup=0,
        teacher_contrast=0.0,
        english_cosine=0.0,
        center_teacher=False,
        projection_init="random",  # keep the prepared student's projection as it is
        freeze_embeddings=True,
        dev_pairs=0,
        model_from="final",
        eval_every=1,  # every step's loss in the run log
        test_sentences=0,
        precision="fp32",
        output=out / "babelspace",
        cache_dir=out / "cache",
    )
    return TrainConfig(**{**fixed, **options})


def prepare_student(student: str, teacher: Any, folder: Path, cfg: Any) -> Path:
    """The student both loops start from, saved to ``folder``: babelspace's student for ``teacher``
    (a Dense projection when ``cfg`` asks for one, drawn from ``cfg.seed``; no final Normalize), with
    dropout off."""
    from babelspace.models.encoder import load_encoder, make_student

    torch.manual_seed(cfg.seed)
    base = load_encoder(student, device="cpu")
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout"):
        if hasattr(base[0].auto_model.config, key):
            setattr(base[0].auto_model.config, key, 0.0)
    model = make_student(base, teacher, projection=cfg.projection_mode, drop_normalize=True)
    model.save(str(folder))
    return folder


def training_pairs(cfg: Any) -> list:
    """The training pairs of ``cfg``, in the order ``babelspace train`` indexes them."""
    from babelspace.data.indexed_pairs import IndexedCorpus
    from babelspace.training.setup.corpora import drop_identical, load_corpora

    train, _dev = load_corpora(cfg)
    train, _ = drop_identical(train, cfg.drop_identical)
    if isinstance(train, IndexedCorpus):
        return train.pairs.take(np.arange(len(train.pairs)))
    return list(train.pairs)


def teacher_cache(cfg: Any, teacher: Any, texts: list[str]):
    """babelspace's teacher cache (what ``babelspace train`` looks its targets up in), holding the
    teacher's vectors of ``texts`` (encoded once, reused by later runs)."""
    from babelspace.resources import cache_dir
    from babelspace.training.setup.teacher_cache import TeacherCache

    cache = TeacherCache(teacher, cfg.teacher, Path(cfg.cache_dir or cache_dir()))
    cache.ensure(list(dict.fromkeys(texts)))
    return cache


def st_train(cfg: Any, pairs: list, lookup: Any, out: Path):
    """(a): sentence-transformers' trainer on ``pairs`` with babelspace's loss and batches, the labels
    looked up by ``lookup`` (source texts -> teacher vectors). Returns the trained model and each
    step's loss."""
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    from babelspace.device import resolve_device
    from babelspace.integrations.sentence_transformers.losses import DistillationLoss
    from babelspace.integrations.sentence_transformers.sampler import balanced_batch_sampler, pairs_dataset
    from babelspace.models.encoder import default_prompt, load_encoder

    device = resolve_device(cfg.device)
    student = load_encoder(str(cfg.student), device=str(device), max_seq_length=cfg.train_seq_length)
    student[0].auto_model.get_input_embeddings().requires_grad_(not cfg.frozen_embeddings)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=cfg.batch_size,
        max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate(),
        lr_scheduler_type=cfg.schedule,
        warmup_steps=cfg.warmup,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.grad_clip,
        optim="adamw_torch_fused",  # babelspace's AdamW
        seed=cfg.seed,
        use_cpu=device.type == "cpu",
        prompts=default_prompt(student) or None,  # babelspace encodes with the model's default prompt
        batch_sampler=balanced_batch_sampler(pairs, mode=cfg.sampling, bucket_by_length=cfg.bucket_by_length),
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    loss = DistillationLoss(student, reduction=cfg.loss_reduction)
    trainer = SentenceTransformerTrainer(
        model=student, args=args, train_dataset=pairs_dataset(pairs, lookup), loss=loss
    )
    trainer.train()
    return student, [h["loss"] for h in trainer.state.log_history if "loss" in h]


def babelspace_train(cfg: Any):
    """(b): babelspace's own loop. Returns the exported model and each step's loss."""
    from sentence_transformers import SentenceTransformer

    from babelspace.training.run import run

    result = run(cfg)
    losses = [h["loss"] for h in result.history if "loss" in h]
    return SentenceTransformer(str(cfg.output), device="cpu"), losses


def max_weight_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    """The largest absolute difference between two models' parameters (same names)."""
    sa, sb = a.state_dict(), b.state_dict()
    if set(sa) != set(sb):
        raise ValueError(f"the models differ in parameters: {sorted(set(sa) ^ set(sb))[:5]}")
    return max(float((sa[k].float().cpu() - sb[k].float().cpu()).abs().max()) for k in sa if sa[k].numel())


def compare(student: str, work: Path, **options: Any) -> dict[str, Any]:
    """Both loops from one prepared student: each step's loss and the largest weight difference."""
    from babelspace.models.encoder import load_encoder

    cfg = parity_config(work, **options)
    teacher = load_encoder(cfg.teacher, device="cpu", max_seq_length=cfg.train_seq_length)
    folder = prepare_student(student, teacher, work / "student", cfg)
    cfg = parity_config(work, **{**options, "student": str(folder)})
    pairs = training_pairs(cfg)
    cache = teacher_cache(cfg, teacher, [p.src for p in pairs])
    st_model, st_losses = st_train(cfg, pairs, cache.lookup, work / "st")
    bs_model, bs_losses = babelspace_train(cfg)
    return {
        "st_losses": st_losses,
        "babelspace_losses": bs_losses,
        "max_weight_difference": max_weight_difference(st_model, bs_model),
        "pairs": len(pairs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="bible", help="babelspace train --data (one corpus)")
    ap.add_argument("--langs", default="de,fr", help="babelspace train --langs")
    ap.add_argument("--max-pairs", type=int, default=2000, help="babelspace train --max-pairs")
    ap.add_argument("--teacher", default="minilm")
    ap.add_argument("--student", default="e5-small")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-seq-length", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        got = compare(
            args.student,
            Path(tmp),
            data=[args.data],
            langs=args.langs.split(",") if args.langs else None,
            max_pairs=args.max_pairs,
            teacher=args.teacher,
            max_steps=args.steps,
            batch_size=args.batch_size,
            max_seq_length=args.max_seq_length,
            lr=args.lr,
            seed=args.seed,
            device=args.device,
        )
    print(f"{got['pairs']} training pairs, {args.steps} steps of {args.batch_size}")
    print("step  ST trainer  babelspace  |difference|")
    for i, (a, b) in enumerate(zip(got["st_losses"], got["babelspace_losses"], strict=True), 1):
        print(f"{i:4d}  {a:10.6f}  {b:10.6f}  {abs(a - b):.2e}")
    print(f"largest difference between the final weights: {got['max_weight_difference']:.2e}")


if __name__ == "__main__":
    main()
