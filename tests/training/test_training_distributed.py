"""Several processes of one run (torchrun, gloo on the CPU): only the main process writes and prints,
every rank's random state is checkpointed and restored, a signal to one rank stops all of them
after the same step, and a dead rank is one line naming it."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from babelspace.checkpoints.checkpoint import list_checkpoints, load_latest
from babelspace.errors import TrainingError
from babelspace.training.collective import (
    StopAgreement,
    check_batch_per_process,
    is_collective_failure,
    own_rng_state,
    rank_failure,
)
from tests.conftest import run_two_processes

WORKER = str(Path(__file__).parents[1] / "workers" / "ddp_train_worker.py")


def _write_corpus(path: Path) -> Path:
    from tests.training.test_training_trainer import write_corpus

    return write_corpus(path)


def _train_args(
    teacher: Path, student: Path, corpus: Path, cache: Path, out: Path, **extra: str
) -> list[str]:
    opts = {
        "--teacher": str(teacher), "--student": str(student), "--data": str(corpus), "--tgt-lang": "de",
        "--batch-size": "8", "--max-steps": "6", "--eval-every": "3", "--lr": "1e-3", "--dev-pairs": "16",
        "--max-seq-length": "16", "--projection-fit-pairs": "64", "--cache-dir": str(cache),
        "--test-sentences": "0", "--seed": "3", "--threads": "1", "--device": "cpu", "--out": str(out),
        **extra,
    }  # fmt: skip
    return ["train", *[x for kv in opts.items() for x in kv]]


def _per_rank_logs(log_dir: Path, name: str) -> dict[int, str]:
    """torchrun ``--log-dir D --redirects 3`` writes each rank's stdout/stderr under D/<id>/attempt_0/<rank>/."""
    return {int(p.parent.name): p.read_text() for p in log_dir.rglob(name)}


def _torchrun(log_dir: Path, *args: str, env: dict[str, str] | None = None, check: bool = True):
    import subprocess

    ran = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "--log-dir", str(log_dir), "--redirects", "3", *args],
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if check:
        assert ran.returncode == 0, (
            f"torchrun exited {ran.returncode}:\n{_per_rank_logs(log_dir, 'stderr.log')}"
        )
    return ran


# ----------------------------------------------------------------------------- cheap: no processes
def test_batch_smaller_than_the_processes_is_refused_in_one_line() -> None:
    check_batch_per_process(2, 2)
    with pytest.raises(TrainingError, match=r"--batch-size 1 is smaller than the 2 processes") as err:
        check_batch_per_process(1, 2)
    assert "\n" not in str(err.value)


def test_own_rng_state_picks_this_ranks_entry_or_falls_back_to_main() -> None:
    state = {"rng": "main", "rng_ranks": ["r0", "r1"]}
    assert own_rng_state(state, 1, 2) == "r1"
    assert own_rng_state(state, 0, 2) == "r0"
    assert own_rng_state(state, 2, 3) == "main"  # written by 2 processes, resumed by 3
    assert own_rng_state({"rng": "main"}, 0, 1) == "main"  # an older checkpoint


def test_checkpoints_carry_the_cuda_random_state_of_every_device(tmp_path, monkeypatch) -> None:
    """Without a GPU: CUDA's state functions are stood in for; the state goes through a real
    checkpoint (``weights_only`` load) and comes back to ``set_rng_state_all``."""
    from babelspace.checkpoints import checkpoint as ck

    states = [torch.arange(16, dtype=torch.uint8), torch.arange(16, 32, dtype=torch.uint8)]
    restored: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in states])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda new: restored.extend(new))
    ck.save_checkpoint(tmp_path, 1, {"rng": ck.rng_state(), "rng_ranks": [ck.rng_state(), ck.rng_state()]})
    state = load_latest(tmp_path)[1]
    ck.set_rng_state(own_rng_state(state, 1, 2))
    assert len(restored) == 2 and all(torch.equal(a, b) for a, b in zip(restored, states, strict=True))


def test_one_process_agreement_is_local() -> None:
    agreement = StopAgreement()
    assert agreement.group is None
    assert agreement.agreed(True) and not agreement.agreed(False)
    assert agreement.gather({"a": 1}) == [{"a": 1}]


# ----------------------------------------------------------------------------- two gloo processes (spawned)
def _agreement_worker(rank: int, init: str, results: dict, die_at: int | None, hang: bool) -> None:
    os.environ["BABELSPACE_DIST_TIMEOUT"] = "3" if hang else "20"
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    agreement = StopAgreement()
    stops = []
    started = time.monotonic()
    try:
        for step in range(1, 6):
            if die_at is not None and rank == 1 and step == die_at:
                if not hang:
                    os._exit(0)  # a rank that dies without a word
                time.sleep(10)  # a rank that stops answering for longer than the deadline
                return
            stops.append(agreement.agreed(rank == 1 and step == 3))
        results[rank] = {"stops": stops, "gathered": agreement.gather({"rank": rank})}
    except Exception as exc:  # noqa: BLE001 - the test inspects what the survivor reports
        failed_after = time.monotonic() - started
        results[rank] = {
            "collective": is_collective_failure(exc),
            "message": str(rank_failure(exc, rank, 2)),
            "seconds": failed_after,
        }
    finally:
        if die_at is None:
            torch.distributed.destroy_process_group()


def _spawn_two(tmp_path: Path, die_at: int | None, hang: bool = False) -> dict:
    manager = mp.Manager()
    results = manager.dict()
    init = f"file://{tmp_path / 'rendezvous'}"
    args = (init, results, die_at, hang)
    mp.start_processes(_agreement_worker, args=args, nprocs=2, start_method="spawn", join=True)
    return dict(results)


def test_a_stop_asked_by_one_rank_is_agreed_by_all(tmp_path) -> None:
    results = _spawn_two(tmp_path, die_at=None)
    # rank 1 alone asked at step 3; both ranks see the stop at step 3 and only then
    assert results[0]["stops"] == results[1]["stops"] == [False, False, True, False, False]
    assert results[0]["gathered"] == [{"rank": 0}, {"rank": 1}]


def test_a_dead_rank_is_one_line_naming_it(tmp_path) -> None:
    results = _spawn_two(tmp_path, die_at=2)
    survivor = results[0]
    assert survivor["collective"]
    message = survivor["message"]
    assert "\n" not in message
    assert message.startswith("rank 0 of 2: rank 1 has died or stopped answering")
    assert "BABELSPACE_DIST_TIMEOUT=20s" in message and "--resume" in message


def test_a_rank_that_stops_answering_fails_the_others_at_the_deadline(tmp_path) -> None:
    results = _spawn_two(tmp_path, die_at=2, hang=True)
    survivor = results[0]
    assert survivor["collective"]
    assert survivor["message"].startswith("rank 0 of 2: rank 1 has died or stopped answering")
    assert "BABELSPACE_DIST_TIMEOUT=3s" in survivor["message"]
    assert survivor["seconds"] < 9  # the 3 s deadline, not the 10 s of silence


# ----------------------------------------------------------------------------- torchrun end to end
@pytest.mark.slow
def test_only_the_main_process_writes_and_prints(tiny_teacher_dir, tiny_nodrop_dir, tmp_path) -> None:
    corpus = _write_corpus(tmp_path / "pairs.tsv")
    out, writes = tmp_path / "out", tmp_path / "writes"
    writes.mkdir()
    args = _train_args(
        tiny_teacher_dir, tiny_nodrop_dir, corpus, tmp_path / "cache", out, **{"--save-every": "3"}
    )
    _torchrun(tmp_path / "logs", WORKER, *args, env={"BABELSPACE_TEST_WRITES": str(writes)})
    stdout = _per_rank_logs(tmp_path / "logs", "stdout.log")
    assert "saved best model" in stdout[0] and "time:" in stdout[0]
    assert stdout[1].strip() == ""
    by_rank = {r: json.loads((writes / f"rank-{r}.json").read_text()) for r in (0, 1)}
    assert by_rank[1] == []
    assert any(w.endswith("README.md") for w in by_rank[0])
    assert any("checkpoints" in w for w in by_rank[0])
    assert (out / "README.md").exists() and (out / "babelspace_training.json").exists()


@pytest.mark.slow
def test_sigterm_to_one_rank_stops_all_and_resume_is_exact(
    tiny_teacher_dir, tiny_model_dir, tmp_path
) -> None:
    """The student has dropout, so each rank's random stream matters: a run whose rank 1 alone gets
    SIGTERM after step 4 stops on both ranks with a checkpoint at step 4 holding both ranks' random
    states; resumed, it ends with the weights of the uninterrupted 2-process run."""
    corpus = _write_corpus(tmp_path / "pairs.tsv")
    cache = tmp_path / "cache"
    full = tmp_path / "full"
    run_two_processes(
        WORKER, *_train_args(tiny_teacher_dir, tiny_model_dir, corpus, cache, full, **{"--save-every": "3"})
    )
    part = tmp_path / "part"
    args = _train_args(tiny_teacher_dir, tiny_model_dir, corpus, cache, part, **{"--save-every": "3"})
    stopped = _torchrun(
        tmp_path / "logs", WORKER, *args, env={"BABELSPACE_TEST_SIGNAL": "1:4:TERM"}, check=False
    )
    assert stopped.returncode != 0
    stderr = _per_rank_logs(tmp_path / "logs", "stderr.log")
    assert "stopped at step 4 by signal 15" in stderr[1]
    assert "stopped at step 4 by a signal to another rank" in stderr[0]
    assert [p.name for p in list_checkpoints(part)] == ["step-00000003", "step-00000004"]
    state = load_latest(part)[1]
    assert len(state["rng_ranks"]) == 2
    assert not torch.equal(state["rng_ranks"][0]["torch"], state["rng_ranks"][1]["torch"])
    run_two_processes(WORKER, *args, "--resume")
    a, b = load_latest(full)[1]["objective"], load_latest(part)[1]["objective"]
    assert load_latest(part)[1]["step"] == 6
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)


@pytest.mark.slow
def test_a_killed_rank_is_one_line_on_the_other(tiny_teacher_dir, tiny_nodrop_dir, tmp_path) -> None:
    """Rank 1 is SIGKILLed after step 2: rank 0 ends with one line naming rank 1 (not a gloo
    traceback), although torchrun's agent sends it SIGTERM as soon as rank 1 is gone."""
    corpus = _write_corpus(tmp_path / "pairs.tsv")
    args = _train_args(tiny_teacher_dir, tiny_nodrop_dir, corpus, tmp_path / "cache", tmp_path / "out")
    env = {"BABELSPACE_TEST_SIGNAL": "1:2:KILL", "BABELSPACE_DIST_TIMEOUT": "60"}
    ran = _torchrun(tmp_path / "logs", WORKER, *args, env=env, check=False)
    assert ran.returncode != 0
    last = _per_rank_logs(tmp_path / "logs", "stderr.log")[0].strip().splitlines()[-1]
    assert last.startswith("babelspace: error: rank 0 of 2: rank 1 has died or stopped answering")
    assert "BABELSPACE_DIST_TIMEOUT=60s" in last and "Traceback" not in last
