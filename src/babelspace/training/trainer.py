"""The training loop shared by every objective.

data -> objective.collate -> objective(batch) -> loss.backward -> clip -> AdamW -> schedule, with a
progress bar, periodic dev evaluation (MSE to the teacher and translation accuracy both ways) and
the best checkpoint (by dev score) kept in ``output`` as a sentence-transformers folder.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from babelspace.data.pairs import ParallelCorpus, ParallelPair
from babelspace.data.readers import load_parallel, subsample
from babelspace.data.sampling import BalancedBatchSampler
from babelspace.encoder import encode, fit_projection, load_encoder, pooled_encoder, projection_layer
from babelspace.errors import TrainingError
from babelspace.evaluation.tatoeba import top1_accuracy
from babelspace.resources import cache_dir
from babelspace.training.checkpoint import (
    checkpoint_root,
    load_latest,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from babelspace.training.config import TrainConfig
from babelspace.training.factory import build_objective, build_student, parse_objective_names
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
    counts: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False


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
    # Retrieval on the dev set is by index: keep each English source (and each target) once, so a
    # verse shared by several languages does not make its other copies count as errors.
    order = np.random.default_rng(cfg.seed).permutation(len(dev_parts))
    seen: set[str] = set()
    unique = []
    for p in (dev_parts[i] for i in order):
        if p.src not in seen and p.tgt not in seen:
            seen.update((p.src, p.tgt))
            unique.append(p)
    dev = ParallelCorpus("dev", unique, reports[0])
    if len(dev) > cfg.dev_pairs:
        dev = subsample(dev, cfg.dev_pairs, seed=cfg.seed)
    return train, dev


def evaluate_dev(
    student: SentenceTransformer,
    dev: Sequence[ParallelPair],
    teacher_vectors: np.ndarray | None,
    batch_size: int = 64,
    teacher_shift: np.ndarray | None = None,
) -> dict[str, float]:
    """Dev translation accuracy both ways in the student's own space and, with a teacher, MSE to
    the teacher (paper reduction) and accuracy of student xx -> teacher en. ``dev_score`` is the mean
    of the accuracies."""
    was_training = student.training
    student.eval()
    src = encode(student, [p.src for p in dev], batch_size=batch_size, normalize=False)
    tgt = encode(student, [p.tgt for p in dev], batch_size=batch_size, normalize=False)
    if was_training:
        student.train()
    out = {
        "dev_acc_xx_en": top1_accuracy(tgt, src),
        "dev_acc_en_xx": top1_accuracy(src, tgt),
    }
    if teacher_vectors is not None:
        target = teacher_vectors if teacher_shift is None else teacher_vectors - teacher_shift
        out["dev_mse"] = float((((src - target) ** 2).sum(1) + ((tgt - target) ** 2).sum(1)).mean())
        out["dev_acc_xx_teacher_en"] = top1_accuracy(tgt, teacher_vectors)
    accs = [v for k, v in out.items() if k.startswith("dev_acc")]
    out["dev_score"] = float(np.mean(accs))
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


def _fit_sample(train: ParallelCorpus, cfg: TrainConfig) -> list[ParallelPair]:
    return subsample(train, min(cfg.projection_fit_pairs, len(train)), seed=cfg.seed + 1).pairs


def _projection_fit(
    student: SentenceTransformer,
    sample: list[ParallelPair],
    cache: TeacherCache,
    cfg: TrainConfig,
    teacher_shift: np.ndarray | None,
) -> float:
    pooled = pooled_encoder(student)
    src = encode(pooled, [p.src for p in sample], normalize=False, show_progress=True)
    tgt = encode(pooled, [p.tgt for p in sample], normalize=False, show_progress=True)
    teacher = cache.lookup([p.src for p in sample])
    return fit_projection(
        student,
        src,
        tgt,
        teacher,
        ridge=cfg.projection_ridge,
        teacher_shift=teacher_shift,
        prior=cfg.projection_prior,
    )


def _contrast_bank(
    cache: TeacherCache,
    fit_sample: list[ParallelPair],
    train: ParallelCorpus,
    planned: Sequence[Sequence[int]],
    teacher_shift: np.ndarray | None,
    cfg: TrainConfig,
) -> np.ndarray:
    """Teacher vectors of up to ``cfg.teacher_negatives`` distinct training English sentences (the
    projection-fit sample and the sources the run will see: all already in the teacher cache, so
    the bank costs no encoding), shifted like the targets. Negatives for the contrastive term."""
    texts = sorted({p.src for p in fit_sample} | {train.pairs[i].src for b in planned for i in b})
    if len(texts) > cfg.teacher_negatives:
        keep = np.random.default_rng(cfg.seed + 2).choice(len(texts), cfg.teacher_negatives, replace=False)
        texts = [texts[i] for i in np.sort(keep)]
    bank = cache.lookup(texts)
    logger.info(
        "teacher-space contrastive term: weight %g, bank of %d teacher vectors",
        cfg.teacher_contrast,
        len(texts),
    )
    return bank if teacher_shift is None else bank - teacher_shift


class Trainer:
    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.timings: dict[str, float] = {}
        self._stop_signal: int | None = None
        self.dist = DistContext.from_env()

    def _tick(self, name: str, t0: float) -> float:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - t0
        return now

    def _on_signal(self, signum: int, _frame: object) -> None:
        logger.warning("received signal %d: saving a checkpoint after this step, then stopping", signum)
        self._stop_signal = signum

    def run(self) -> TrainResult:
        cfg = self.cfg
        names = [name for name, _ in parse_objective_names(cfg.objective)]
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        set_seed(cfg.seed)
        output = Path(cfg.output)
        _check_writable(output)
        t = time.perf_counter()

        teacher = None
        if "distill" in names:
            teacher = load_encoder(cfg.teacher, max_seq_length=cfg.max_seq_length)
            teacher.eval()
        student = build_student(cfg, teacher, names)
        train, dev = load_corpora(cfg)
        identical = sum(p.src == p.tgt for p in train.pairs)
        if identical:
            logger.warning(
                "%d training pairs have identical source and target%s",
                identical,
                " (dropped)" if cfg.drop_identical else " (kept; --drop-identical drops them)",
            )
            if cfg.drop_identical:
                train = ParallelCorpus(train.name, [p for p in train.pairs if p.src != p.tgt], train.report)
        logger.info("train: %d pairs %s; dev: %d pairs", len(train), dict(train.lang_pairs()), len(dev))
        t = self._tick("setup", t)

        sampler = BalancedBatchSampler(
            train.pairs,
            cfg.batch_size,
            mode=cfg.sampling,
            bucket_by_length=cfg.bucket_by_length,
            seed=cfg.seed,
        )
        total_steps = self._total_steps(len(sampler))
        planned = self._planned_batches(sampler, total_steps)
        stats = {
            "identical_pairs": identical,
            "truncated_sentences": count_truncated(
                student, [train.pairs[i] for b in planned for i in b], cfg
            ),
        }
        fingerprint = train.fingerprint()

        resumed = load_latest(output) if cfg.resume else None
        if resumed is not None:
            _check_resume(resumed[1], fingerprint, cfg)
        elif cfg.resume:
            logger.warning("--resume: no checkpoint in %s, starting from scratch", output)

        cache = None
        dev_teacher = None
        teacher_shift = None
        untrained = None
        contrast_bank = None
        if teacher is not None:
            fit_sample = (
                _fit_sample(train, cfg)
                if cfg.projection_init == "lstsq" or cfg.center_teacher or cfg.teacher_contrast > 0
                else []
            )
            # Teacher vectors once, before training, for every source the run will see (+ dev, fit
            # sample). Under torchrun the main process encodes and writes them; the others then read.
            if not self.dist.is_main:
                self.dist.barrier()
            cache = TeacherCache(teacher, cfg.teacher, Path(cfg.cache_dir or cache_dir()))
            cache.ensure(
                [train.pairs[i].src for b in planned for i in b]
                + [p.src for p in dev.pairs]
                + [p.src for p in fit_sample]
            )
            if self.dist.is_main:
                self.dist.barrier()
            dev_teacher = cache.lookup([p.src for p in dev.pairs])
            if cfg.center_teacher:
                # Distil into the mean-centred teacher space: regression onto raw teacher vectors
                # reproduces their large common component, which makes a few teacher vectors hubs
                # for cosine retrieval (docs/distillation.md).
                teacher_shift = cache.lookup(sorted({p.src for p in fit_sample})).mean(0)
            if cfg.teacher_contrast > 0:
                contrast_bank = _contrast_bank(cache, fit_sample, train, planned, teacher_shift, cfg)
            t = self._tick("teacher_encoding", t)
            if resumed is None and self.dist.is_main:
                # where the untrained student stands in the teacher's space (chance for a new projection)
                untrained = evaluate_dev(student, dev.pairs, dev_teacher, teacher_shift=teacher_shift)
                logger.info("untrained dev: %s", _fmt(untrained))
            if cfg.projection_init == "lstsq" and resumed is None and projection_layer(student) is not None:
                fit_loss = _projection_fit(student, fit_sample, cache, cfg, teacher_shift)
                logger.info("projection fitted in closed form (train loss %.4f)", fit_loss)
                t = self._tick("projection_fit", t)

        objective = build_objective(cfg, student, cache, teacher_shift, contrast_bank)
        _freeze(student, cfg)
        params = [p for p in objective.parameters() if p.requires_grad]
        model = self.dist.wrap(objective)
        optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate(), weight_decay=cfg.weight_decay)
        scheduler = get_linear_schedule_with_warmup(optimizer, min(cfg.warmup, total_steps), total_steps)

        if resumed is not None:
            path, state = resumed
            objective.load_state_dict(state["objective"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            set_rng_state(state["rng"])
            step, history, best, best_step = (
                state["step"],
                state["history"],
                state["best"],
                state["best_step"],
            )
            skipped_nonfinite = state.get("skipped_nonfinite", 0)
            logger.info("resumed from %s (step %d of %d)", path, step, total_steps)
        else:
            step, skipped_nonfinite, best_step = 0, 0, 0
            history = [{"step": 0, "stage": "untrained", **untrained}] if untrained else []
            best = {"dev_score": float("-inf")}
            if self.dist.is_main:
                best = evaluate_dev(student, dev.pairs, dev_teacher, teacher_shift=teacher_shift)
                history.append({"step": 0, **best})
                self._save(student, output, {"step": 0, **best})
                logger.info("step 0 dev: %s", _fmt(best))
        t = self._tick("evaluation", t)

        def checkpoint_state() -> dict[str, Any]:
            return {
                "objective": objective.state_dict(),
                "objective_name": cfg.objective,
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "sampler": sampler.state_dict(batches_done=step),
                "rng": rng_state(),
                "step": step,
                "history": history,
                "best": best,
                "best_step": best_step,
                "skipped_nonfinite": skipped_nonfinite,
                "fingerprint": fingerprint,
                "config": cfg.to_dict(),
            }

        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in previous:
            signal.signal(sig, self._on_signal)
        student.train()
        train_time = 0.0
        pairs_seen = 0
        interrupted = False
        bar = tqdm(total=total_steps, initial=step, desc="train", unit="step", disable=None)
        try:
            while step < total_steps:
                step_t0 = time.perf_counter()
                global_batch = planned[step]
                # under torchrun each process takes its share of the global batch; DDP averages
                # the gradients, which equals one process on the whole batch for mean losses
                pairs = [train.pairs[i] for i in global_batch[self.dist.rank :: self.dist.world]]
                out = model(objective.collate(pairs))
                loss = out["loss"]
                optimizer.zero_grad(set_to_none=True)
                finite = bool(torch.isfinite(loss))
                grad_norm = float("nan")
                if finite:
                    loss.backward()
                    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip or float("inf")))
                    finite = math.isfinite(grad_norm)
                if not finite:
                    what = "loss" if not torch.isfinite(loss) else "gradient"
                    where = ", ".join(p.origin for p in pairs[:8]) + (" ..." if len(pairs) > 8 else "")
                    if skipped_nonfinite >= cfg.skip_nonfinite:
                        raise TrainingError(
                            f"non-finite {what} at step {step + 1}; batch sources: {where}. The last good "
                            f"checkpoint in {checkpoint_root(output)} is intact (resume with --resume; "
                            "--skip-nonfinite N skips up to N such batches)"
                        )
                    skipped_nonfinite += 1
                    logger.warning("skipping batch at step %d: non-finite %s (%s)", step + 1, what, where)
                    optimizer.zero_grad(set_to_none=True)
                else:
                    optimizer.step()
                scheduler.step()
                step += 1
                pairs_seen += len(global_batch)
                train_time += time.perf_counter() - step_t0
                bar.update(1)
                postfix = {"loss": f"{loss.item():.4f}", "pairs/s": f"{pairs_seen / train_time:.1f}"}
                if self.dist.is_main and (step % cfg.eval_every == 0 or step == total_steps):
                    t_eval = time.perf_counter()
                    dev_metrics = evaluate_dev(student, dev.pairs, dev_teacher, teacher_shift=teacher_shift)
                    history.append(
                        {
                            "step": step,
                            "loss": loss.item(),
                            **{k: float(v.detach()) for k, v in out.items()},
                            **dev_metrics,
                        }
                    )
                    logger.info("step %d loss %.4f dev: %s", step, loss.item(), _fmt(dev_metrics))
                    if dev_metrics["dev_score"] > best["dev_score"]:
                        best, best_step = dev_metrics, step
                        self._save(student, output, {"step": step, **dev_metrics})
                    postfix["dev_acc"] = f"{dev_metrics['dev_score']:.1f}"
                    if "dev_mse" in dev_metrics:
                        postfix["dev_mse"] = f"{dev_metrics['dev_mse']:.3f}"
                    self.timings["evaluation"] = (
                        self.timings.get("evaluation", 0.0) + time.perf_counter() - t_eval
                    )
                bar.set_postfix(postfix)
                if self.dist.is_main and (
                    (cfg.save_every and step % cfg.save_every == 0) or self._stop_signal is not None
                ):
                    save_checkpoint(output, step, checkpoint_state(), keep_last=cfg.keep_last)
                if self._stop_signal is not None:
                    interrupted = True
                    break
        finally:
            bar.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.dist.is_main and cfg.save_every and not interrupted and step % cfg.save_every:
            save_checkpoint(output, step, checkpoint_state(), keep_last=cfg.keep_last)
        if self.dist.is_main and cfg.export == "final" and not interrupted:
            self._save(student, output, {"step": step, **history[-1]})
            best_step = step
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
            counts={**stats, "skipped_nonfinite": skipped_nonfinite},
            interrupted=interrupted,
        )
        if self.dist.is_main:
            self._write_log(output, cfg, history, best_step, result.counts)
        self.dist.close()
        if interrupted:
            raise TrainingInterrupted(
                f"stopped at step {step} by signal {self._stop_signal}; resume with --resume"
            )
        return result

    @staticmethod
    def _write_log(output: Path, cfg: TrainConfig, history: list, best_step: int, counts: dict) -> None:
        (output / "babelspace_training.json").write_text(
            json.dumps(
                {
                    "config": cfg.to_dict(),
                    "history": history,
                    "best_step": best_step,
                    "counts": counts,
                },
                indent=2,
            )
        )

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
    def _save(student: SentenceTransformer, output: Path, info: dict[str, float]) -> None:
        """Export the best model as a sentence-transformers folder (written aside, then swapped in).
        ``SentenceTransformer.save`` leaves the model in eval mode; the caller's mode is restored, so
        training after a mid-run export keeps its dropout (as a run resumed from that step does)."""
        tmp = output.with_name(output.name + ".saving")
        if tmp.exists():
            shutil.rmtree(tmp)
        was_training = student.training
        try:
            student.save(str(tmp))
            (tmp / "babelspace_best.json").write_text(json.dumps(info, indent=2))
            for item in tmp.iterdir():
                dest = output / item.name
                if dest.is_dir():
                    shutil.rmtree(dest)
                os.replace(item, dest)
        except OSError as exc:
            raise TrainingError(f"could not save the model to {output}: {exc}") from exc
        finally:
            student.train(was_training)
            shutil.rmtree(tmp, ignore_errors=True)


class DistContext:
    """Process-group facts under ``torchrun`` (gloo on CPU, NCCL on GPU); a no-op otherwise."""

    def __init__(self, rank: int = 0, world: int = 1) -> None:
        self.rank, self.world = rank, world

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> DistContext:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        return cls(dist.get_rank(), dist.get_world_size())

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        if self.world <= 1:
            return module
        from torch.nn.parallel import DistributedDataParallel

        # find_unused_parameters: objectives may leave parts of the student out of a given loss
        return DistributedDataParallel(module, find_unused_parameters=True)

    def close(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()
            dist.destroy_process_group()


class TrainingInterrupted(TrainingError):
    """The run stopped on SIGTERM/SIGINT after writing a checkpoint."""


def _check_writable(output: Path) -> None:
    try:
        output.mkdir(parents=True, exist_ok=True)
        probe = output / f".babelspace-write-test-{os.getpid()}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        raise TrainingError(
            f"output directory {output} is not writable ({exc}); choose another --output"
        ) from exc


def _check_resume(state: dict[str, Any], fingerprint: str, cfg: TrainConfig) -> None:
    if state.get("fingerprint") != fingerprint and not cfg.force_resume:
        raise TrainingError(
            "the training corpus changed since the checkpoint was written (fingerprint "
            f"{state.get('fingerprint', '?')[:12]} -> {fingerprint[:12]}); refusing to resume. "
            "Restore the data, use a new --output, or pass --force-resume"
        )
    if state.get("objective_name") != cfg.objective:
        raise TrainingError(
            f"checkpoint was written by objective {state.get('objective_name')!r}, not {cfg.objective!r}"
        )


def count_truncated(student: SentenceTransformer, pairs: Sequence[ParallelPair], cfg: TrainConfig) -> int:
    """How many of the sentences the run trains on exceed ``max_seq_length`` tokens (they are
    truncated; the count goes into the run summary)."""
    texts = sorted({p.src for p in pairs} | {p.tgt for p in pairs})
    truncated = 0
    for i in range(0, len(texts), 4096):
        enc = student.tokenizer(texts[i : i + 4096], add_special_tokens=True, truncation=False)["input_ids"]
        truncated += sum(len(ids) > cfg.max_seq_length for ids in enc)
    if truncated:
        logger.warning(
            "%d training sentences exceed --max-seq-length %d and are truncated",
            truncated,
            cfg.max_seq_length,
        )
    return truncated


def _fmt(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.3f}" for k, v in metrics.items())


def train(cfg: TrainConfig) -> TrainResult:
    """Run one training job described by ``cfg`` (see :class:`TrainConfig`)."""
    return Trainer(cfg).run()
