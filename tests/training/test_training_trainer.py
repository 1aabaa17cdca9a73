from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.checkpoints.checkpoint import list_checkpoints, load_latest
from babelspace.errors import CorpusFormatError, TrainingError
from babelspace.training.config import TrainConfig
from babelspace.training.trainer import train
from tests.conftest import run_two_processes

EN = "the a god lord king people land house city day cat dog".split()
DE = "der die gott herr könig volk haus stadt tag katze".split()


def write_corpus(path: Path, n: int = 160, seed: int = 0) -> Path:
    rng = random.Random(seed)
    lines = []
    seen = set()
    while len(lines) < n:
        k = rng.randint(2, 6)
        idx = [rng.randrange(len(DE)) for _ in range(k)]
        src = " ".join(EN[i] for i in idx)
        tgt = " ".join(DE[i] for i in idx)
        if src not in seen:
            seen.add(src)
            lines.append(f"{src}\t{tgt}")
    path.write_text("\n".join(lines) + "\n")
    return path


def tiny_config(tmp_path: Path, teacher: Path, student: Path, corpus: Path, **kw) -> TrainConfig:
    base = dict(
        teacher=str(teacher),
        student=str(student),
        data=[str(corpus)],
        tgt_lang="de",
        batch_size=8,
        max_steps=12,
        eval_every=4,
        lr=1e-3,
        dev_pairs=16,
        max_seq_length=16,
        projection_fit_pairs=64,
        output=tmp_path / "out",
        cache_dir=tmp_path / "cache",
        test_sentences=0,
        seed=3,
    )
    base.update(kw)
    return TrainConfig(**base)


def test_tiny_distillation_end_to_end(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    res = train(
        tiny_config(
            tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, max_steps=24, projection_init="random"
        )
    )
    assert res.steps == 24
    assert [h["step"] for h in res.history] == [0, 0, 4, 8, 12, 16, 20, 24]  # untrained, start, evals
    assert res.pairs_per_second > 0
    model = SentenceTransformer(str(res.output), device="cpu")
    assert model.encode(["the king"]).shape == (1, 48)  # projected into the teacher's 48-d space
    log = json.loads((res.output / "babelspace_training.json").read_text())
    assert log["best_step"] == res.best_step
    # dev MSE falls during training (from a random projection)
    assert min(h["dev_mse"] for h in res.history[1:]) < res.history[0]["dev_mse"]


def _weights(out: Path) -> dict[str, torch.Tensor]:
    state = load_latest(out)
    assert state is not None
    return state[1]["objective"]


def _assert_same_weights(out_a: Path, out_b: Path, rtol: float = 0.0, atol: float = 1e-6) -> None:
    """The newest checkpoints of two runs hold the same tensors."""
    a, b = _weights(out_a), _weights(out_b)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=rtol, atol=atol)


def test_resume_equals_uninterrupted_run(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    full = train(tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_model_dir, corpus, save_every=4))
    # second run: stopped after 5 steps (checkpoint at 4), then resumed to the end
    part_cfg = tiny_config(tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, save_every=4)
    # a SIGTERM arriving during step 6: the trainer finishes the step, checkpoints and stops
    from babelspace.training import trainer as tr

    t = tr.Trainer(part_cfg)
    steps = {"n": 0}
    orig_step = torch.optim.AdamW.step

    def counting_step(self, *a, **k):  # type: ignore[no-untyped-def]
        steps["n"] += 1
        if steps["n"] == 6:
            t._stop_signal = signal.SIGTERM
        return orig_step(self, *a, **k)

    torch.optim.AdamW.step = counting_step  # type: ignore[method-assign]
    try:
        with pytest.raises(tr.TrainingInterrupted):
            t.run()
    finally:
        torch.optim.AdamW.step = orig_step  # type: ignore[method-assign]
    assert [p.name for p in list_checkpoints(part_cfg.output)][-1] == "step-00000006"
    resumed = train(TrainConfig(**{**part_cfg.__dict__, "resume": True}))
    assert resumed.steps == 12
    _assert_same_weights(full.output, resumed.output)


def test_nonfinite_loss_stops_with_step_and_sources(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    from babelspace.objectives.distillation import DistillationObjective

    corpus = write_corpus(tmp_path / "pairs.tsv")
    original = DistillationObjective.forward
    calls = {"n": 0}

    def poisoned(self, batch):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        out = original(self, batch)
        if calls["n"] == 5:
            out["loss"] = out["loss"] * float("nan")
        return out

    monkeypatch.setattr(DistillationObjective, "forward", poisoned)
    cfg = tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, save_every=2)
    with pytest.raises(TrainingError, match=r"non-finite loss at step 5; batch sources: .*pairs\.tsv:\d+"):
        train(cfg)
    latest = load_latest(cfg.output)
    assert latest is not None and latest[1]["step"] == 4  # last good checkpoint intact
    calls["n"] = 0
    res = train(TrainConfig(**{**cfg.__dict__, "skip_nonfinite": 1, "output": tmp_path / "out2"}))
    assert res.counts["skipped_nonfinite"] == 1 and res.steps == 12


def test_bad_environment_and_input(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises((TrainingError, CorpusFormatError)):
        train(tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, empty))
    few = write_corpus(tmp_path / "few.tsv", n=30)
    with pytest.raises(
        TrainingError,
        match=r"has 30 pairs: the dev set is capped at 10% of the corpus \(3 pairs\), below the minimum of "
        r"10; give at least 100 pairs",
    ):
        train(tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, few))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if os.access(locked, os.W_OK):  # running as root: simulate with a file in the way
        locked.chmod(0o700)
        (tmp_path / "blocker").write_text("x")
        target = tmp_path / "blocker" / "out"
    else:
        target = locked / "out"
    with pytest.raises(TrainingError, match="not writable"):
        train(tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, output=target))
    from babelspace.errors import ResourceError

    with pytest.raises(ResourceError):
        train(tiny_config(tmp_path, tiny_teacher_dir, tmp_path / "no-such-student", corpus))


def test_resume_refuses_changed_corpus(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    cfg = tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, save_every=4, max_steps=4)
    train(cfg)
    write_corpus(corpus, seed=1)  # the file changes under the run
    with pytest.raises(TrainingError, match="corpus changed"):
        train(TrainConfig(**{**cfg.__dict__, "resume": True, "max_steps": 8}))
    res = train(TrainConfig(**{**cfg.__dict__, "resume": True, "force_resume": True, "max_steps": 8}))
    assert res.steps == 8


@pytest.mark.parametrize("objective", ["mexma", "contrastive", "mexma+distill"])
def test_other_objectives_train_through_the_same_loop(
    objective, tiny_teacher_dir, tiny_model_dir, tmp_path
) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    cfg = tiny_config(
        tmp_path,
        tiny_teacher_dir,
        tiny_model_dir,
        corpus,
        objective=objective,
        head_layers=1,
        head_heads=2,
        max_steps=6,
    )
    res = train(cfg)
    assert res.steps == 6
    keys = set(res.history[-1])
    if "mexma" in objective:
        assert any(k.endswith("ce") for k in keys) and any(k.endswith("sentence_mse") for k in keys)
    model = SentenceTransformer(str(res.output), device="cpu")
    assert np.isfinite(model.encode(["the king"])).all()


def test_mexma_resume_equals_uninterrupted_run(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    kw = dict(objective="mexma", head_layers=1, head_heads=2, save_every=2, max_steps=6)
    full = train(tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_model_dir, corpus, **kw))
    short = train(
        tiny_config(tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, **{**kw, "max_steps": 6})
    )
    assert short.steps == 6
    # cut run b back to its step-2 checkpoint (as if killed right after writing it) and resume
    import shutil

    for ckpt in list_checkpoints(tmp_path / "b" / "out")[1:]:
        shutil.rmtree(ckpt)
    resumed = train(
        TrainConfig(
            **{
                **tiny_config(tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, **kw).__dict__,
                "resume": True,
            }
        )
    )
    assert resumed.steps == 6
    _assert_same_weights(full.output, resumed.output)


@pytest.mark.slow
def test_sigkill_at_a_random_step_then_resume_matches(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    """A real `babelspace train` process is SIGKILLed once a random checkpoint exists (possibly while
    it is writing the next one); `--resume` then ends with the weights of an uninterrupted run."""
    corpus = write_corpus(tmp_path / "pairs.tsv")
    kw = dict(save_every=1, max_steps=14, keep_last=3)
    full = train(tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_model_dir, corpus, **kw))
    cfg = tiny_config(tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, **kw)
    args = [
        sys.executable, "-m", "babelspace", "train",
        "--teacher", cfg.teacher, "--student", cfg.student, "--data", str(corpus), "--tgt-lang", "de",
        "--batch-size", "8", "--max-steps", "14", "--eval-every", "4", "--lr", "1e-3", "--dev-pairs", "16",
        "--max-seq-length", "16", "--projection-fit-pairs", "64", "--out", str(cfg.output),
        "--cache-dir", str(cfg.cache_dir), "--test-sentences", "0", "--seed", "3",
        "--save-every", "1", "--keep-last", "3",
    ]  # fmt: skip
    kill_after = random.Random().randint(2, 9)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        done = list_checkpoints(cfg.output)
        if done and int(done[-1].name.split("-")[1]) >= kill_after:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    latest = load_latest(cfg.output)
    assert latest is not None and latest[1]["step"] < 14
    resumed = train(TrainConfig(**{**cfg.__dict__, "resume": True}))
    assert resumed.steps == 14
    _assert_same_weights(full.output, resumed.output)


def test_interrupted_checkpoint_write_leaves_last_good_one(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    from babelspace.checkpoints import checkpoint as ck

    corpus = write_corpus(tmp_path / "pairs.tsv")
    cfg = tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, save_every=2, max_steps=6)
    original = ck.os.replace
    calls = {"n": 0}

    def crash_on_third(src, dst):  # type: ignore[no-untyped-def]
        if str(src).endswith("-00000006-" + str(os.getpid())):
            raise OSError(28, "No space left on device")
        calls["n"] += 1
        return original(src, dst)

    monkeypatch.setattr(ck.os, "replace", crash_on_third)
    with pytest.raises(
        TrainingError, match="No space left on device.*checkpoint at step 4 is intact: rerun with --resume"
    ):
        train(cfg)
    latest = load_latest(cfg.output)
    assert latest is not None and latest[1]["step"] == 4
    assert not list((cfg.output / "checkpoints").glob(".tmp-*"))


@pytest.mark.slow
@pytest.mark.parametrize("teacher_contrast", [0.0, 1.0], ids=["paper-loss", "with-teacher-contrast"])
def test_real_teacher_and_student_on_bible_pairs(
    teacher_path, e5_small_path, tmp_path, teacher_contrast: float
) -> None:
    """Real teacher (minilm), real student (e5-small), real Bible pairs: dev MSE falls and dev
    accuracy in the teacher's space rises from chance, without hurting the student's own accuracy,
    with the paper's loss alone and with babelspace's default teacher-space contrastive term."""
    cfg = TrainConfig(
        teacher_contrast=teacher_contrast,
        # retrieval against raw teacher vectors with centred queries (no mean hub bias; the
        # teacher-space export is checked in test_exported_student_is_a_drop_in_for_the_teacher)
        export_space="centred",
        teacher=str(teacher_path),
        student=str(e5_small_path),
        data=["bible"],
        langs=["de", "fr"],
        batch_size=8,
        max_steps=6,
        eval_every=6,
        dev_pairs=80,
        projection_fit_pairs=160,
        projection_fit_english=200,  # the default's English fit, at this test's scale
        max_seq_length=64,
        output=tmp_path / "out",
        cache_dir=tmp_path / "cache",
        test_sentences=0,
    )
    res = train(cfg)
    untrained, last = res.history[0], res.history[-1]
    assert untrained["stage"] == "untrained"
    assert untrained["dev_acc_xx_teacher_en"] < 10  # unrelated spaces: chance
    assert last["dev_mse"] < untrained["dev_mse"]
    assert last["dev_acc_xx_teacher_en"] > 50
    assert last["dev_acc_xx_en"] >= untrained["dev_acc_xx_en"] - 5


@pytest.mark.slow
def test_torchrun_two_gloo_processes_equal_one_process(tiny_teacher_dir, tiny_nodrop_dir, tmp_path) -> None:
    """`torchrun --nproc_per_node 2 -m babelspace train` splits each global batch across two CPU
    processes (gloo); the result equals one process with the same global batch."""
    corpus = write_corpus(tmp_path / "pairs.tsv")
    common = [
        "train", "--teacher", str(tiny_teacher_dir), "--student", str(tiny_nodrop_dir), "--data", str(corpus),
        "--tgt-lang", "de", "--batch-size", "8", "--max-steps", "6", "--eval-every", "3", "--lr", "1e-3",
        "--dev-pairs", "16", "--max-seq-length", "16", "--projection-fit-pairs", "64",
        "--cache-dir", str(tmp_path / "cache"), "--test-sentences", "0", "--seed", "3",
        "--save-every", "6", "--threads", "1",
        # bench/gpu_check.sh runs this on two GPUs (NCCL) with BABELSPACE_TEST_DEVICE=cuda
        "--device", os.environ.get("BABELSPACE_TEST_DEVICE", "cpu"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = tmp_path / "two"
    run_two_processes("-m", "babelspace", *common, "--out", str(two))
    one = tmp_path / "one"
    subprocess.run(
        [sys.executable, "-m", "babelspace", *common, "--out", str(one)],
        check=True,
        env=env,
        capture_output=True,
    )
    _assert_same_weights(one, two, rtol=1e-5, atol=1e-5)


def test_contrast_bank_is_distinct_capped_shifted_training_english() -> None:
    from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport
    from babelspace.training.setup.phases import contrast_bank

    pairs = [ParallelPair(f"en {i % 7}", f"de {i}", "en", "de", f"t:{i}") for i in range(20)]
    train_corpus = ParallelCorpus("train", pairs, ReadReport("t"))

    class Cache:
        def lookup(self, texts):
            return np.stack([np.full(3, float(t.split()[1])) for t in texts]).astype(np.float32)

    fit_sample = pairs[:3]  # "en 0".."en 2"
    planned = [[5, 6], [13, 19]]  # "en 5", "en 6", "en 6", "en 5"
    shift = np.array([1.0, 1.0, 1.0], dtype=np.float32)
    sources = [train_corpus.pairs[i].src for b in planned for i in b]
    bank = contrast_bank(Cache(), fit_sample, sources, shift, TrainConfig())
    # distinct English of the fit sample and the planned batches, teacher vectors minus the shift
    assert sorted(bank[:, 0].tolist()) == [-1.0, 0.0, 1.0, 4.0, 5.0]
    capped = contrast_bank(Cache(), fit_sample, sources, None, TrainConfig(teacher_negatives=2))
    assert len(capped) == 2 and len(set(capped[:, 0].tolist())) == 2
    again = contrast_bank(Cache(), fit_sample, sources, None, TrainConfig(teacher_negatives=2))
    assert np.array_equal(capped, again)  # deterministic: a resumed run rebuilds the same bank


def test_contrast_bank_sample_of_a_long_stream_is_uniform_bounded_and_order_free(monkeypatch) -> None:
    """Beyond teacher_negatives distinct texts the bank keeps the smallest seeded hashes: the same
    bank whatever the order or chunking of the stream, k texts, spread over the whole stream."""
    import babelspace.training.setup.phases as phases

    stream = [f"en {i % 5000}" for i in range(12_000)]
    one = phases._bottom_k(["en 1"], stream, 300, seed=2)
    monkeypatch.setattr(phases, "BANK_CHUNK", 7)
    again = phases._bottom_k([], list(reversed(stream)) + ["en 1"], 300, seed=2)
    assert one == again == sorted(one) and len(one) == 300
    ids = np.array([int(t.split()[1]) for t in one])
    assert (ids < 2500).sum() > 100 and (ids >= 2500).sum() > 100  # not the first texts seen
    assert phases._bottom_k(["b"], ["a", "b", "c"], 300, seed=2) == ["a", "b", "c"]  # all when few
    assert phases._bottom_k([], stream, 300, seed=3) != one  # the seed draws


def test_truncation_count_of_a_long_run_stops_at_its_limit(tiny_model_dir) -> None:
    from sentence_transformers import SentenceTransformer

    from babelspace.data.pairs import ParallelPair
    from babelspace.training.setup.corpora import count_truncated

    student = SentenceTransformer(str(tiny_model_dir), device="cpu")
    long = " ".join(["word"] * 50)

    def pairs():  # an endless stream: the count must stop reading it
        i = 0
        while True:
            yield ParallelPair(f"{long} {i}", f"kurz {i}", "en", "de", f"t:{i}")
            i += 1

    assert count_truncated(student, pairs(), 16, limit=10) == (5, 10)
    few = [ParallelPair(f"{long} {i}", f"kurz {i}", "en", "de", f"t:{i}") for i in range(3)]
    assert count_truncated(student, iter(few), 16, limit=10) == (3, None)


def test_student_stays_in_train_mode_after_dev_evaluation_and_export(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """Regression: evaluating/exporting the best model mid-run used to leave the student in eval
    mode, so every later step trained without dropout (and a resumed run, with dropout, diverged)."""
    from babelspace.objectives.distillation import DistillationObjective

    modes: list[bool] = []
    original = DistillationObjective.forward

    def recording(self, batch):  # type: ignore[no-untyped-def]
        modes.append(all(m.training for m in self.student.modules()))
        return original(self, batch)

    monkeypatch.setattr(DistillationObjective, "forward", recording)
    corpus = write_corpus(tmp_path / "pairs.tsv")
    res = train(tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, max_steps=8, eval_every=2))
    assert res.best_step > 0  # at least one mid-run export happened
    assert modes == [True] * 8


@pytest.mark.slow
def test_exported_student_is_a_drop_in_for_the_teacher(teacher_path, e5_small_path, tmp_path) -> None:
    """The student is trained in the mean-centred teacher space; the exported model adds the mean
    back, so its vectors sit in the teacher's raw space: lower MSE to the teacher's raw vectors than
    the same model without the shift, and English queries find the teacher's own English vectors.
    The plain shift export (``--export-norm free``): the default's radius map is measured on the
    full default run (README), where English queries find the teacher's English at 99.8%."""
    from babelspace.evaluation.held_out import held_out_texts
    from babelspace.metrics.tatoeba import top1_accuracy
    from babelspace.models.encoder import encode

    cfg = TrainConfig(
        teacher=str(teacher_path),
        student=str(e5_small_path),
        langs=["de"],
        batch_size=8,
        max_steps=4,
        eval_every=4,
        dev_pairs=80,
        projection_fit_pairs=600,
        projection_fit_english=300,  # the default's English fit, at this test's scale
        output=tmp_path / "out",
        cache_dir=tmp_path / "cache",
        test_sentences=0,
        export_norm="free",
    )
    res = train(cfg)
    en, _ = held_out_texts(["de"], 200, 0)  # test books: never trained or fitted on
    teacher = encode(SentenceTransformer(str(teacher_path), device="cpu"), en, normalize=False)
    exported = SentenceTransformer(str(res.output), device="cpu")
    shifted = encode(exported, en, normalize=False)
    dense = [m for m in exported if type(m).__name__ == "Dense"][-1]
    mu = np.load(res.output / "babelspace_teacher_mean.npy")
    with torch.no_grad():
        dense.linear.bias -= torch.from_numpy(mu)
    unshifted = encode(exported, en, normalize=False)
    mse = lambda v: float(((v - teacher) ** 2).sum(1).mean())  # noqa: E731
    assert mse(shifted) < mse(unshifted)
    assert top1_accuracy(shifted, teacher) >= 95.0  # 4 steps here; the default run: docs/distillation.md


def test_export_final_reports_the_final_step_not_the_best(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """With --model-from final the summary's dev scores are those of the exported (last) step, even
    when an earlier step scored higher (here every dev check scores lower than the one before)."""
    from babelspace.training import trainer as trainer_mod

    original, calls = trainer_mod.Trainer._evaluate, []

    def worsening(self, *args, **kwargs):
        metrics = original(self, *args, **kwargs)
        calls.append(1)
        return {**metrics, "dev_score": 100.0 - len(calls)}

    monkeypatch.setattr(trainer_mod.Trainer, "_evaluate", worsening)
    corpus = write_corpus(tmp_path / "pairs.tsv")
    cfg = tiny_config(
        tmp_path / "out",
        tiny_teacher_dir,
        tiny_model_dir,
        corpus,
        max_steps=4,
        eval_every=2,
        model_from="final",
    )
    result = train(cfg)
    final = result.history[-1]
    assert result.best_step == final["step"] == 4
    assert result.best_dev["dev_score"] == final["dev_score"] < result.history[0]["dev_score"]


def test_export_space_teacher_adds_the_mean_centred_does_not(
    tiny_teacher_dir, tiny_model_dir, tmp_path
) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    runs = {}
    for space in ("teacher", "centred"):
        cfg = tiny_config(
            tmp_path / space,
            tiny_teacher_dir,
            tiny_model_dir,
            corpus,
            max_steps=4,
            model_from="final",
            teacher_contrast_space="centred",  # the same training in every run
        )
        runs[space] = train(TrainConfig(**{**cfg.__dict__, "export_space": space}))
    mu = np.load(runs["teacher"].output / "babelspace_teacher_mean.npy")
    assert not (runs["centred"].output / "babelspace_teacher_mean.npy").exists()
    texts = ["the king", "der könig ist gut"]
    raw = SentenceTransformer(str(runs["teacher"].output), device="cpu").encode(texts)
    centred = SentenceTransformer(str(runs["centred"].output), device="cpu").encode(texts)
    # same weights, the mean added back after giving the centred part the teacher's norm
    radius = np.linalg.norm(raw - mu, axis=1)
    np.testing.assert_allclose(radius, radius[0], rtol=1e-4)
    np.testing.assert_allclose(
        (raw - mu) / radius[0], centred / np.linalg.norm(centred, axis=1)[:, None], atol=1e-5
    )
    free = tiny_config(
        tmp_path / "free",
        tiny_teacher_dir,
        tiny_model_dir,
        corpus,
        max_steps=4,
        model_from="final",
        teacher_contrast_space="centred",
    )
    out = train(TrainConfig(**{**free.__dict__, "export_norm": "free"})).output
    raw = SentenceTransformer(str(out), device="cpu").encode(texts)
    np.testing.assert_allclose(raw - mu, centred, atol=1e-5)  # --export-norm free: the mean alone
