"""Whole tiny runs that must lose nothing (issue 25): --resume on a finished run without
checkpoints, two runs on one --out, a symlinked --out, an unwritable cache, the same corpus
named by another path on --resume."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from babelspace.checkpoints.checkpoint import list_checkpoints
from babelspace.errors import ResourceError, TrainingError
from babelspace.training.config import TrainConfig
from babelspace.training.trainer import train
from tests.training.test_training_trainer import tiny_config, write_corpus


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def run(tiny_teacher_dir, tiny_model_dir, tmp_path):
    corpus = write_corpus(tmp_path / "pairs.tsv", n=120)

    def config(**kw) -> TrainConfig:
        kw = {"max_steps": 4, "eval_every": 2, **kw}
        return tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, **kw)

    return config


def test_resume_of_a_finished_run_without_checkpoints_keeps_its_model(run, monkeypatch) -> None:
    first = train(run())
    model = first.output / "model.safetensors"
    before = _sha(model)
    import babelspace.training.trainer as trainer_mod

    def no_load(*a, **k):  # noqa: ANN002, ANN003
        raise AssertionError("models loaded although --resume had nothing to resume")

    monkeypatch.setattr(trainer_mod, "load_encoder", no_load)
    with pytest.raises(
        TrainingError, match=r"--resume: no checkpoint in .*out; without --resume a new run needs"
    ):
        train(TrainConfig(**{**run().__dict__, "resume": True, "max_steps": 8}))
    assert _sha(model) == before


def test_a_second_run_on_a_busy_output_is_refused_before_work(run, monkeypatch) -> None:
    cfg = run()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom babelspace.training.output.lock import output_lock\n"
         f"with output_lock({str(cfg.output)!r}):\n    print('held', flush=True)\n    time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(
            TrainingError, match=rf"is in use by another babelspace run \(pid {holder.pid} on host"
        ):
            train(cfg)
    finally:
        holder.kill()
        holder.wait()
    assert not cfg.output.exists()  # nothing written
    assert train(cfg).steps == 4  # free again once the holder is gone


def test_symlinked_output_receives_the_model_and_stays_a_link(run, tmp_path) -> None:
    target = tmp_path / "disk" / "model"
    target.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(target)
    train(run(output=link, save_every=2))
    assert link.is_symlink() and (target / "model.safetensors").is_file()
    assert [p.name for p in list_checkpoints(target)] == ["step-00000002", "step-00000004"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == ["model"]


def test_unwritable_cache_is_refused_before_any_model_loads(run, tmp_path, monkeypatch) -> None:
    import babelspace.training.trainer as trainer_mod

    monkeypatch.setattr(trainer_mod, "load_encoder", lambda *a, **k: pytest.fail("model loaded"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ResourceError, match=r"cache folder .*file/cache \(--cache-dir\) is not writable"):
        train(run(cache_dir=tmp_path / "file" / "cache"))
    monkeypatch.setenv("BABELSPACE_CACHE", str(tmp_path / "file" / "env-cache"))
    with pytest.raises(
        ResourceError, match=r"\(BABELSPACE_CACHE\) is not writable .* point BABELSPACE_CACHE"
    ):
        train(run(cache_dir=None))


def test_resume_names_the_same_corpus_by_another_path(run, tmp_path, monkeypatch) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    train(run(data=["pairs.tsv"], save_every=2, max_steps=2))
    monkeypatch.chdir(tmp_path / "sub")
    resumed = train(run(data=["../pairs.tsv"], save_every=2, resume=True, max_steps=4))
    assert resumed.steps == 4
    with pytest.raises(TrainingError, match=r"refusing to resume: --data ../pairs.tsv -> ../pairs.tsv:2"):
        train(run(data=["../pairs.tsv:2"], resume=True, max_steps=6))
