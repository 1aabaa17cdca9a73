"""The training loop shared by every objective.

data -> objective.collate -> objective(batch) -> loss.backward -> clip -> AdamW -> schedule, with a
progress bar, periodic dev evaluation (MSE to the teacher and translation accuracy both ways) and
the best checkpoint (by dev score) kept in ``output`` as a sentence-transformers folder.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from babelspace.data.pairs import ParallelCorpus, ParallelPair
from babelspace.data.readers import load_parallel, subsample
from babelspace.data.sampling import BalancedBatchSampler
from babelspace.encoder import encode, fit_projection, load_encoder, make_student, pooled_encoder
from babelspace.errors import TrainingError
from babelspace.evaluation.tatoeba import top1_accuracy
from babelspace.objectives.distillation import DistillationLoss
from babelspace.resources import cache_dir
from babelspace.training.config import TrainConfig
from babelspace.training.teacher_cache import TeacherCache

logger = logging.getLogger(__name__)


@dataclass
class TrainResult:
    output: Path
    steps: int
    best_step: int
    best_dev: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    pairs_per_second: float = 0.0
    data_report: list[str] = field(default_factory=list)


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def load_corpora(cfg: TrainConfig) -> tuple[ParallelCorpus, ParallelCorpus]:
    """Training and dev pairs. The Bible has its own dev books; other corpora give up ``dev_pairs``
    pairs (seeded, stratified by language pair) that are then never trained on."""
    train_parts: list[ParallelPair] = []
    dev_parts: list[ParallelPair] = []
    reports = []
    for spec in cfg.data:
        corpus = load_parallel(
            spec,
            langs=cfg.langs,
            split="train",
            skip_bad_lines=cfg.skip_bad_lines,
            src_lang=cfg.src_lang,
            tgt_lang=cfg.tgt_lang,
        )
        reports.append(corpus.report)
        if len(corpus) == 0:
            raise TrainingError(f"corpus {spec!r} has no usable pairs ({corpus.report.summary()})")
        if spec == "bible":
            dev = load_parallel("bible", langs=cfg.langs, split="dev")
            train_parts += corpus.pairs
            dev_parts += dev.pairs
        else:
            n_dev = min(cfg.dev_pairs, len(corpus) // 10)
            if n_dev < 10 or len(corpus) - n_dev < cfg.batch_size:
                raise TrainingError(
                    f"corpus {spec!r} has {len(corpus)} pairs: too few to hold out a dev set of at least 10 "
                    f"pairs and still fill a batch of {cfg.batch_size}; give more data or a smaller --batch-size"
                )
            dev = subsample(corpus, n_dev, seed=cfg.seed)
            dev_set = {(p.src, p.tgt) for p in dev.pairs}
            dev_parts += dev.pairs
            train_parts += [p for p in corpus.pairs if (p.src, p.tgt) not in dev_set]
    train = ParallelCorpus("train", train_parts, reports[0])
    if cfg.max_pairs is not None and len(train) > cfg.max_pairs:
        train = subsample(train, cfg.max_pairs, seed=cfg.seed)
    dev = ParallelCorpus("dev", dev_parts, reports[0])
    if len(dev) > cfg.dev_pairs:
        dev = subsample(dev, cfg.dev_pairs, seed=cfg.seed)
    return train, dev


def evaluate_dev(
    student: SentenceTransformer,
    dev: Sequence[ParallelPair],
    teacher_vectors: np.ndarray,
    batch_size: int = 64,
) -> dict[str, float]:
    """Dev MSE to the teacher (paper reduction) and translation accuracy both ways, in the student's
    own space and against the teacher's English vectors. ``dev_score`` is their mean accuracy."""
    was_training = student.training
    student.eval()
    src = encode(student, [p.src for p in dev], batch_size=batch_size, normalize=False)
    tgt = encode(student, [p.tgt for p in dev], batch_size=batch_size, normalize=False)
    if was_training:
        student.train()
    mse = float((((src - teacher_vectors) ** 2).sum(1) + ((tgt - teacher_vectors) ** 2).sum(1)).mean())
    out = {
        "dev_mse": mse,
        "dev_acc_xx_en": 100 * top1_accuracy(tgt, src),
        "dev_acc_en_xx": 100 * top1_accuracy(src, tgt),
        "dev_acc_xx_teacher_en": 100 * top1_accuracy(tgt, teacher_vectors),
    }
    out["dev_score"] = (out["dev_acc_xx_en"] + out["dev_acc_en_xx"] + out["dev_acc_xx_teacher_en"]) / 3
    return out


def _freeze(student: SentenceTransformer, cfg: TrainConfig) -> None:
    auto = getattr(student[0], "auto_model", None)
    if auto is None:
        return
    if cfg.freeze_embeddings:
        emb = auto.get_input_embeddings()
        for p in emb.parameters():
            p.requires_grad = False
    if cfg.train_layers is not None:
        layers = getattr(getattr(auto, "encoder", None), "layer", None)
        if layers is None:
            raise TrainingError("--train-layers needs a BERT-like encoder with encoder.layer")
        n_frozen = len(layers) - cfg.train_layers
        for module in [auto.embeddings, *list(layers)[: max(0, n_frozen)]]:
            for p in module.parameters():
                p.requires_grad = False


def _projection_fit(
    student: SentenceTransformer, train: ParallelCorpus, cache: TeacherCache, cfg: TrainConfig
) -> float:
    sample = subsample(train, min(cfg.projection_fit_pairs, len(train)), seed=cfg.seed + 1).pairs
    pooled = pooled_encoder(student)
    src = encode(pooled, [p.src for p in sample], normalize=False, show_progress=True)
    tgt = encode(pooled, [p.tgt for p in sample], normalize=False, show_progress=True)
    teacher = cache.lookup([p.src for p in sample])
    return fit_projection(student, src, tgt, teacher, ridge=cfg.projection_ridge)


class Trainer:
    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.timings: dict[str, float] = {}

    def _tick(self, name: str, t0: float) -> float:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - t0
        return now

    def run(self) -> TrainResult:
        cfg = self.cfg
        if cfg.objective != "distill":
            raise TrainingError(f"objective {cfg.objective!r} is not available yet")
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        set_seed(cfg.seed)
        output = Path(cfg.output)
        output.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()

        teacher = load_encoder(cfg.teacher, max_seq_length=cfg.max_seq_length)
        teacher.eval()
        student = make_student(
            cfg.student, teacher, projection=cfg.projection, max_seq_length=cfg.max_seq_length
        )
        train, dev = load_corpora(cfg)
        logger.info("train: %d pairs %s; dev: %d pairs", len(train), dict(train.lang_pairs()), len(dev))
        t = self._tick("setup", t)

        cache = TeacherCache(teacher, cfg.teacher, Path(cfg.cache_dir or cache_dir()))
        sampler = BalancedBatchSampler(
            train.pairs,
            cfg.batch_size,
            mode=cfg.sampling,
            bucket_by_length=cfg.bucket_by_length,
            seed=cfg.seed,
        )
        total_steps = self._total_steps(len(sampler))
        planned = self._planned_batches(sampler, total_steps)
        # Teacher vectors once, before training, for every source the run will see (+ dev).
        needed = [train.pairs[i].src for b in planned for i in b] + [p.src for p in dev.pairs]
        cache.ensure(needed)
        dev_teacher = cache.lookup([p.src for p in dev.pairs])
        t = self._tick("teacher_encoding", t)

        if cfg.projection_init == "lstsq":
            fit_loss = _projection_fit(student, train, cache, cfg)
            logger.info("projection fitted in closed form (train loss %.4f)", fit_loss)
        t = self._tick("projection_fit", t)

        objective = DistillationLoss(student, cache.lookup, reduction=cfg.loss_reduction)
        _freeze(student, cfg)
        params = [p for p in objective.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        scheduler = get_linear_schedule_with_warmup(optimizer, min(cfg.warmup, total_steps), total_steps)

        history: list[dict[str, float]] = []
        best = evaluate_dev(student, dev.pairs, dev_teacher)
        best_step = 0
        history.append({"step": 0, **best})
        self._save(student, output, cfg, {"step": 0, **best})
        logger.info("step 0 dev: %s", _fmt(best))
        t = self._tick("evaluation", t)

        student.train()
        train_time = 0.0
        pairs_seen = 0
        bar = tqdm(total=total_steps, desc="train", unit="step", disable=None)
        step = 0
        for batch_idx in planned:
            step_t0 = time.perf_counter()
            pairs = [train.pairs[i] for i in batch_idx]
            batch = objective.collate(pairs)
            out = objective(batch)
            loss = out["loss"]
            if not torch.isfinite(loss):
                raise TrainingError(
                    f"non-finite loss at step {step + 1}; batch sources: {', '.join(p.origin for p in pairs[:8])}"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            optimizer.step()
            scheduler.step()
            step += 1
            pairs_seen += len(pairs)
            train_time += time.perf_counter() - step_t0
            bar.update(1)
            postfix = {"loss": f"{loss.item():.4f}", "pairs/s": f"{pairs_seen / train_time:.1f}"}
            if step % cfg.eval_every == 0 or step == total_steps:
                t_eval = time.perf_counter()
                dev_metrics = evaluate_dev(student, dev.pairs, dev_teacher)
                history.append({"step": step, "loss": loss.item(), **dev_metrics})
                if dev_metrics["dev_score"] > best["dev_score"]:
                    best, best_step = dev_metrics, step
                    self._save(student, output, cfg, {"step": step, **dev_metrics})
                postfix.update(
                    dev_mse=f"{dev_metrics['dev_mse']:.3f}", dev_acc=f"{dev_metrics['dev_score']:.1f}"
                )
                self.timings["evaluation"] = (
                    self.timings.get("evaluation", 0.0) + time.perf_counter() - t_eval
                )
            bar.set_postfix(postfix)
        bar.close()
        self.timings["training"] = train_time
        result = TrainResult(
            output=output,
            steps=step,
            best_step=best_step,
            best_dev=best,
            history=history,
            timings=dict(self.timings),
            pairs_per_second=pairs_seen / train_time if train_time else 0.0,
            data_report=[train.report.summary()],
        )
        (output / "babelspace_training.json").write_text(
            json.dumps({"config": cfg.to_dict(), "history": history, "best_step": best_step}, indent=2)
        )
        return result

    def _total_steps(self, batches_per_epoch: int) -> int:
        cfg = self.cfg
        if cfg.max_steps is not None:
            return int(cfg.max_steps)
        if cfg.epochs is not None:
            return max(1, math.ceil(cfg.epochs * batches_per_epoch))
        raise TrainingError("give --epochs or --max-steps")

    @staticmethod
    def _planned_batches(sampler: BalancedBatchSampler, total_steps: int) -> list[list[int]]:
        sampler.infinite = True
        it = iter(sampler)
        return [next(it) for _ in range(total_steps)]

    @staticmethod
    def _save(student: SentenceTransformer, output: Path, cfg: TrainConfig, info: dict[str, float]) -> None:
        student.save(str(output))
        (output / "babelspace_best.json").write_text(json.dumps(info, indent=2))


def _fmt(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.3f}" for k, v in metrics.items())


def train(cfg: TrainConfig) -> TrainResult:
    return Trainer(cfg).run()
