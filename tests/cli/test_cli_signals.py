"""SIGTERM in every phase is handled as SIGINT is (issue 35, items 12 and 21): one line on stderr,
the exit code docs/training.md gives, no temporary files, and no empty output folder or lock file
left by a run that never wrote anything. A real signal, sent to a real ``babelspace`` process
paused in the phase (tests/workers/signal_phase_worker.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).parents[1] / "workers" / "signal_phase_worker.py"


def _signalled(phase: str, argv: list[str], signum: int = signal.SIGTERM) -> tuple[int, str]:
    """Run the worker paused in ``phase``, send ``signum`` there: (exit code, stderr)."""
    env = {**os.environ, "BABELSPACE_TEST_PAUSE": phase, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "paused", proc.communicate()[1][-3000:]
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, err


def _babelspace_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("babelspace:")]


@pytest.fixture()
def train_argv(tiny_teacher_dir, tiny_model_dir, tmp_path) -> list[str]:
    from tests.training.test_training_trainer import write_corpus

    corpus = write_corpus(tmp_path / "pairs.tsv")
    return [
        "train", "--teacher", str(tiny_teacher_dir), "--student", str(tiny_model_dir), "--data", str(corpus),
        "--tgt-lang", "de", "--out", str(tmp_path / "runs" / "out"), "--max-steps", "4", "--batch-size", "4",
        "--eval-every", "2", "--projection-fit-pairs", "32", "--dev-pairs", "16", "--test-sentences", "0",
        "--max-seq-length", "16", "--threads", "1", "--cache-dir", str(tmp_path / "cache"),
    ]  # fmt: skip


def _debris(root: Path) -> list[str]:
    """Temporary files (``.tmp-*``, ``.NAME.tmp-*``, ``.NAME.new-*``, ``.NAME.old-*``) and lock files
    under ``root``."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob(".*")
        if ".tmp-" in p.name or ".new-" in p.name or ".old-" in p.name or p.name.endswith(".lock")
    )


def test_sigterm_in_the_arrow_conversion_leaves_nothing(train_argv, tmp_path) -> None:
    rc, err = _signalled("arrow", train_argv)
    assert rc == 143, err[-3000:]
    assert _babelspace_lines(err) == [
        f"babelspace: interrupted by SIGTERM; nothing was written to {tmp_path}/runs/out"
    ]
    assert "Traceback" not in err
    assert _debris(tmp_path) == []
    assert not (tmp_path / "runs").exists()  # the output folder it created (and its parent) are gone


def test_sigterm_in_the_teacher_encoding_leaves_no_empty_output(train_argv, tmp_path) -> None:
    rc, err = _signalled("teacher", train_argv)
    assert rc == 143, err[-3000:]
    assert _babelspace_lines(err) == [
        f"babelspace: interrupted by SIGTERM; nothing was written to {tmp_path}/runs/out"
    ]
    assert not (tmp_path / "runs").exists() and _debris(tmp_path) == []


def test_sigterm_in_the_step_loop_checkpoints_and_exits_2(train_argv, tmp_path) -> None:
    rc, err = _signalled("step", train_argv)
    assert rc == 2, err[-3000:]
    assert _babelspace_lines(err)[-1].endswith("stopped at step 2 by signal 15; resume with --resume")
    assert (tmp_path / "runs" / "out" / "checkpoints" / "step-00000002" / "state.pt").is_file()
    assert _debris(tmp_path) == []


def test_sigterm_in_the_final_export_keeps_the_last_model_and_removes_the_new_one(
    train_argv, tmp_path
) -> None:
    out = tmp_path / "runs" / "out"
    rc, err = _signalled("export", [*train_argv, "--model-from", "final", "--save-every", "2"])
    assert rc == 143, err[-3000:]
    assert _babelspace_lines(err) == [
        "babelspace: interrupted by SIGTERM; the checkpoint at step 4 is intact: rerun with --resume to "
        "continue from it"
    ]
    assert (out / "model.safetensors").is_file()  # the step-0 export stays whole
    assert _debris(tmp_path) == []


def test_sigterm_in_mine_encoding_says_what_a_rerun_reuses(tiny_model_dir, tmp_path) -> None:
    for name in ("m.de", "m.en"):
        (tmp_path / name).write_text("hello world\ngood day\n")
    argv = ["mine", "--src", str(tmp_path / "m.de"), "--tgt", str(tmp_path / "m.en"), "--model",
            str(tiny_model_dir), "--out", str(tmp_path / "pairs.tsv"), "--no-progress"]  # fmt: skip
    rc, err = _signalled("mine", argv)
    assert rc == 143, err[-3000:]
    assert _babelspace_lines(err) == [
        f"babelspace: interrupted by SIGTERM; {tmp_path}/pairs.tsv not written; the same command again "
        "reuses the shards encoded so far"
    ]
    assert not (tmp_path / "pairs.tsv").exists() and _debris(tmp_path) == []


def test_sigterm_raises_terminated_in_the_main_thread_and_only_within_the_block() -> None:
    from babelspace.cli.signals import Terminated, exit_code, interrupt_line, sigterm_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated) as caught:
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()  # the handler raises here, if not already
    assert signal.getsignal(signal.SIGTERM) is before
    caught.value.add_note("what was kept")
    assert exit_code(caught.value) == 143 and exit_code(KeyboardInterrupt()) == 130
    assert interrupt_line(caught.value) == "babelspace: interrupted by SIGTERM; what was kept"
    assert interrupt_line(KeyboardInterrupt()) == "babelspace: interrupted by SIGINT"
