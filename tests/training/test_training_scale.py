"""Training on corpora through the Arrow cache: dataset columns, a corpus larger than the memory the
run may grow by, the input pipeline's workers, random sampling."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from babelspace.training.trainer import train
from tests.training.test_training_trainer import _assert_same_weights, tiny_config, write_corpus


def test_dataset_folder_with_english_non_english_columns_trains(
    tiny_teacher_dir, tiny_model_dir, tmp_path
) -> None:
    """sentence-transformers' parallel-sentences layout loads as it is."""
    import datasets

    pairs = [line.split("\t") for line in write_corpus(tmp_path / "c.tsv").read_text().splitlines()]
    folder = tmp_path / "parallel-sentences"
    datasets.Dataset.from_dict(
        {"english": [e for e, _ in pairs], "non_english": [d for _, d in pairs]}
    ).save_to_disk(str(folder))
    cfg = tiny_config(
        tmp_path,
        tiny_teacher_dir,
        tiny_model_dir,
        folder,
        max_steps=4,
        src_col="english",
        tgt_col="non_english",
    )
    res = train(cfg)
    assert res.steps == 4
    assert res.data_report == [f"{folder}: read 160, kept 160, skipped 0"]


def test_loader_workers_train_exactly_like_the_main_thread(
    tiny_teacher_dir, tiny_model_dir, tmp_path
) -> None:
    """Batches tokenized in 2 worker processes give the very weights of batches tokenized inline."""
    corpus = write_corpus(tmp_path / "pairs.tsv")
    kw = dict(save_every=8, max_steps=8, projection_init="random")
    inline = train(
        tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_model_dir, corpus, loader_workers=0, **kw)
    )
    workers = train(
        tiny_config(tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, loader_workers=2, **kw)
    )
    _assert_same_weights(inline.output, workers.output)


def test_random_sampling_trains(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    res = train(
        tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, max_steps=3, sampling="random")
    )
    assert res.steps == 3


_CHILD = """
import json, resource, sys
from babelspace.training.config import TrainConfig
from babelspace.training.trainer import train
train(TrainConfig(**json.loads(sys.argv[1])))
print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _peak_rss_mb(cfg: dict) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(cfg)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_mb"]


def _big_corpus(path: Path, n: int) -> Path:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(3000)]
    with path.open("w") as f:
        for i in range(n):
            src = " ".join(rng.choices(words, k=20))
            f.write(f"{src} {i}\t{src.upper()} {i}\ten\t{('de', 'fr', 'sw')[i % 3]}\n")
    return path


def test_a_corpus_larger_than_the_memory_budget_trains(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    """A corpus of ~60 MB (about 250 MB as pair objects) trains a few steps while the process grows by
    far less than the file: the converted corpus stays on disk, memory-mapped (the conversion itself,
    done once beforehand, streams in blocks)."""
    from babelspace.data.arrow_corpus import ReadOptions, open_corpus

    big = _big_corpus(tmp_path / "big.tsv", 400_000)
    small = write_corpus(tmp_path / "small.tsv")
    open_corpus(str(big), ReadOptions(), tmp_path / "cache")  # converted once, outside the measured run
    base = dict(
        teacher=str(tiny_teacher_dir),
        student=str(tiny_model_dir),
        batch_size=8,
        max_steps=3,
        eval_every=3,
        dev_pairs=16,
        max_seq_length=16,
        projection_fit_pairs=64,
        cache_dir=str(tmp_path / "cache"),
        test_sentences=0,
        tgt_lang="de",
    )
    baseline = _peak_rss_mb({**base, "data": [str(small)], "output": str(tmp_path / "o1")})
    peak = _peak_rss_mb({**base, "data": [str(big)], "output": str(tmp_path / "o2")})
    budget_mb = big.stat().st_size / 2**20 / 2  # half the file: the old reader held several times it
    assert peak - baseline < budget_mb, (peak, baseline, budget_mb)


def test_a_plan_far_longer_than_its_corpus_is_read_once_per_pair(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """``--max-pairs 10 --max-steps 1000000000`` used to stream the plan step by step for the
    truncation count, the teacher cache and the contrastive bank (hours before step 0): a plan that
    cycles its corpus has the corpus's texts, so setup reads each pair once and computes no batch."""
    from types import SimpleNamespace

    from sentence_transformers import SentenceTransformer

    from babelspace.data.sampling import BalancedBatchSampler
    from babelspace.training.setup import phases

    corpus = write_corpus(tmp_path / "pairs.tsv")
    cfg = tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, max_steps=10**9, max_pairs=10)
    batches: list[int] = []
    batch = BalancedBatchSampler.batch

    def counted(sampler, step):  # a bounded test: stop a step-by-step stream early
        batches.append(step)
        assert len(batches) < 1000, "setup streams the plan step by step"
        return batch(sampler, step)

    monkeypatch.setattr(BalancedBatchSampler, "batch", counted)
    plan = phases.prepare_data(cfg, SentenceTransformer(str(tiny_model_dir), device="cpu"))
    sources = list(plan.sources())
    corpus_sources = [p.src for p in plan.pairs(range(len(plan.train)))]
    assert plan.total_steps == 10**9 and sources == corpus_sources and len(sources) == 10
    one = SimpleNamespace(process_index=0, num_processes=1, wait_for_everyone=lambda: None)
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    targets = phases.teacher_targets(cfg, teacher, plan, one)
    assert batches == []  # no step of the plan was computed
    assert targets.cache is not None and targets.cache.encoded == len(
        set(sources) | {p.src for p in plan.dev.pairs}
    )


def _die_in_a_worker_at_step_11(self, step):
    import os
    import signal

    import torch.utils.data

    if step == 11 and torch.utils.data.get_worker_info() is not None:
        os.kill(os.getpid(), signal.SIGKILL)
    return _STEP_ITEM(self, step)


_STEP_ITEM = None


def test_a_killed_loader_worker_is_one_line_naming_it_and_the_checkpoint(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """SIGKILL of one ``--loader-workers`` process: one line that names the worker's pid and what
    ``--resume`` continues from (torch's 35-line ``RuntimeError`` traceback before)."""
    import re

    import pytest

    from babelspace.errors import TrainingError
    from babelspace.training import batches

    global _STEP_ITEM
    _STEP_ITEM = batches.StepBatches.__getitem__
    monkeypatch.setattr(batches.StepBatches, "__getitem__", _die_in_a_worker_at_step_11)
    corpus = write_corpus(tmp_path / "pairs.tsv")
    cfg = tiny_config(
        tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, loader_workers=2, save_every=2, max_steps=14
    )
    with pytest.raises(TrainingError) as caught:
        train(cfg)
    message = str(caught.value)
    assert "\n" not in message
    # the worker loads step 11 once the loop holds step 3's batch (8 batches in flight), so the
    # checkpoint of step 2 exists; the one named is the newest on disk
    found = re.fullmatch(
        # torch reports the death either way, depending on which of its checks sees it first
        r"input worker process \d+ (?:is killed by signal: Killed|exited unexpectedly) \(the run was at step \d+\); "
        r"--resume continues from the last checkpoint \(step (\d+)\)",
        message,
    )
    assert found, message
    newest = max(int(p.name.split("-")[1]) for p in (cfg.output / "checkpoints").glob("step-*"))
    assert int(found.group(1)) == newest >= 2


def test_dead_worker_reads_both_of_torchs_reports() -> None:
    from babelspace.training.batches import dead_worker

    killed = RuntimeError("DataLoader worker (pid 4242) is killed by signal: Killed. ")
    exited = RuntimeError("DataLoader worker (pid(s) 11, 12) exited unexpectedly")
    assert dead_worker(killed) == "input worker process 4242 is killed by signal: Killed"
    assert dead_worker(exited) == "input worker processes 11, 12 exited unexpectedly"
    assert dead_worker(RuntimeError("CUDA out of memory")) is None
    assert dead_worker(ValueError("DataLoader worker (pid 1) exited unexpectedly")) is None


def test_gradient_checkpointing_recomputes_layers_and_trains_the_same_weights(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """``--gradient-checkpointing`` reaches the config and turns on the encoder's own checkpointing:
    every layer's forward runs under torch's checkpoint during training (none without the flag), and
    the weights equal those of the run that kept its activations (dropout masks replayed)."""
    import transformers.modeling_utils as modeling_utils

    from babelspace.cli import build_parser
    from babelspace.cli.train import config_from_args
    from tests.training.test_training_trainer import _assert_same_weights

    assert config_from_args(
        build_parser().parse_args(["train", "--gradient-checkpointing"])
    ).gradient_checkpointing
    assert not config_from_args(build_parser().parse_args(["train"])).gradient_checkpointing
    calls = []
    checkpoint = modeling_utils.checkpoint

    def counted(*args, **kwargs):
        calls.append(kwargs.get("use_reentrant"))
        return checkpoint(*args, **kwargs)

    monkeypatch.setattr(modeling_utils, "checkpoint", counted)
    corpus = write_corpus(tmp_path / "pairs.tsv")
    kw = dict(max_steps=4, save_every=4, projection_init="random")
    plain = train(tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_model_dir, corpus, **kw))
    assert calls == []
    recomputed = train(
        tiny_config(
            tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, gradient_checkpointing=True, **kw
        )
    )
    assert len(calls) >= 4 * 2 and set(calls) == {False}  # 2 layers a step, non-reentrant
    _assert_same_weights(plain.output, recomputed.output)
