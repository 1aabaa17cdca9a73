"""--out safety: refuse foreign folders and other runs' outputs, check writability first, and
swap exported models in as a whole (a kill at any point leaves the old or the new model)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from babelspace.checkpoints.checkpoint import list_checkpoints, save_checkpoint
from babelspace.errors import TrainingError
from babelspace.training.output import folder as out_mod
from babelspace.training.output.folder import (
    cleanup_failed_output,
    export_model_atomically,
    prepare_output,
    recover_interrupted_export,
)


def _files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "checkpoints" not in p.parts and p.name != "babelspace_training.json"
    }


def _old_output(folder: Path) -> Path:
    """A previous babelspace output: a model, a run log and one checkpoint."""
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "1_Pooling" / "config.json").write_text("old pooling")
    (folder / "model.safetensors").write_text("old weights")
    (folder / "babelspace_best.json").write_text("old best")
    (folder / "babelspace_training.json").write_text("{}")
    save_checkpoint(folder, 2, {"step": 2}, run_id="oldrun")
    return folder


def _save_new(folder: Path) -> None:
    folder.mkdir()
    (folder / "model.safetensors").write_text("new weights")
    (folder / "config.json").write_text("new config")


NEW_FILES = {
    "model.safetensors": "new weights",
    "config.json": "new config",
    "babelspace_best.json": '{\n  "step": 4\n}\n',
    "babelspace_files.json": json.dumps(
        {"written": ["babelspace_best.json", "babelspace_files.json", "config.json", "model.safetensors"]},
        indent=2,
    )
    + "\n",
}


def test_non_empty_foreign_folder_is_refused_and_untouched(tmp_path) -> None:
    (tmp_path / "mine" / "1_Pooling").mkdir(parents=True)
    (tmp_path / "mine" / "README.md").write_text("my notes")
    (tmp_path / "mine" / "1_Pooling" / "notes.txt").write_text("keep")
    for flags in (
        {"resume": False, "overwrite": False},
        {"resume": False, "overwrite": True},
        {"resume": True, "overwrite": False},
    ):
        with pytest.raises(
            TrainingError,
            match=r"--out .*mine is a non-empty folder that is not a babelspace output \(holds 1_Pooling, README.md\)",
        ):
            prepare_output(tmp_path / "mine", **flags)
    assert (tmp_path / "mine" / "README.md").read_text() == "my notes"
    assert (tmp_path / "mine" / "1_Pooling" / "notes.txt").read_text() == "keep"


def test_earlier_run_needs_resume_or_overwrite(tmp_path) -> None:
    old = _old_output(tmp_path / "run")
    with pytest.raises(
        TrainingError, match=r"holds checkpoints of an earlier run \(run oldrun up to step 2\); pass --resume"
    ):
        prepare_output(old, resume=False, overwrite=False)
    prepare_output(old, resume=True, overwrite=False)
    assert [p.name for p in list_checkpoints(old)] == ["step-00000002"]
    prepare_output(old, resume=False, overwrite=True)
    assert list_checkpoints(old) == [] and not (old / "babelspace_training.json").exists()
    assert (old / "model.safetensors").exists()  # the model is replaced only by the next export


def test_exported_model_without_checkpoints_needs_overwrite(tmp_path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "babelspace_best.json").write_text("{}")
    with pytest.raises(TrainingError, match="holds an earlier babelspace model; pass --resume"):
        prepare_output(tmp_path / "m", resume=False, overwrite=False)
    prepare_output(tmp_path / "m", resume=False, overwrite=True)


def test_empty_or_missing_folder_is_fine_and_failed_run_cleans_up(tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    prepare_output(tmp_path / "empty", resume=False, overwrite=False)
    cleanup_failed_output(tmp_path / "empty")
    assert (tmp_path / "empty").is_dir()  # not created by this run: left alone
    target = tmp_path / "a" / "b" / "out"
    prepare_output(target, resume=False, overwrite=False)
    assert target.is_dir()
    cleanup_failed_output(target)
    assert not (tmp_path / "a").exists()


def test_failed_run_keeps_a_folder_it_wrote_into(tmp_path) -> None:
    target = tmp_path / "out"
    prepare_output(target, resume=False, overwrite=False)
    (target / "checkpoints").mkdir()
    cleanup_failed_output(target)
    assert (target / "checkpoints").is_dir()


def test_output_that_is_a_file_is_refused(tmp_path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(TrainingError, match=r"--out .*f is a file, not a folder"):
        prepare_output(tmp_path / "f", resume=False, overwrite=False)
    with pytest.raises(TrainingError, match=r"--out .*f/sub is not writable: it cannot be created"):
        prepare_output(tmp_path / "f" / "sub", resume=False, overwrite=False)


def test_read_only_parent_is_refused_before_any_work(tmp_path, monkeypatch) -> None:
    parent = tmp_path / "ro"
    (parent / "out").mkdir(parents=True)
    real_write = Path.write_bytes

    def write_bytes(self: Path, data: bytes) -> int:
        if self.parent == parent:
            raise PermissionError(13, "Permission denied")
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    with pytest.raises(
        TrainingError, match=r"--out parent folder .*ro is not writable \(Permission denied\)"
    ):
        prepare_output(parent / "out", resume=False, overwrite=False)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_parent_with_real_permissions(tmp_path) -> None:
    parent = tmp_path / "ro"
    (parent / "out").mkdir(parents=True)
    parent.chmod(0o555)
    try:
        with pytest.raises(TrainingError, match="parent folder"):
            prepare_output(parent / "out", resume=False, overwrite=False)
    finally:
        parent.chmod(0o755)


def test_export_swaps_whole_folder_and_keeps_run_files(tmp_path) -> None:
    old = _old_output(tmp_path / "run")
    export_model_atomically(_save_new, old, {"step": 4})
    assert _files(old) == NEW_FILES  # 1_Pooling/ of the old model is gone, not mixed in
    assert [p.name for p in list_checkpoints(old)] == ["step-00000002"]
    assert (old / "babelspace_training.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no temporary folder left


def test_export_into_missing_folder(tmp_path) -> None:
    export_model_atomically(_save_new, tmp_path / "new", {"step": 4})
    assert _files(tmp_path / "new") == NEW_FILES


def _kill_after(n_ops: int, exchange: bool, output: Path) -> None:
    """In a forked child: export, SIGKILL itself right after the n-th rename/exchange."""
    pid = os.fork()
    if pid == 0:  # child
        count = [0]
        real_replace, real_exchange = os.replace, out_mod._exchange

        def tick() -> None:
            count[0] += 1
            if count[0] == n_ops:
                os.kill(os.getpid(), signal.SIGKILL)

        def replace(a, b):
            real_replace(a, b)
            tick()

        def exch(a, b):
            ok = exchange and real_exchange(a, b)
            if ok:
                tick()
            return ok

        os.replace = replace
        out_mod._exchange = exch
        try:
            export_model_atomically(_save_new, output, {"step": 4})
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_kill_at_any_point_leaves_old_or_new_model(tmp_path, exchange) -> None:
    if exchange and not out_mod._exchange(tmp_path, tmp_path):
        pytest.skip("renameat2 not available here")
    old_files = None
    for n in range(1, 7):
        run = tmp_path / f"k{n}" / "run"
        _old_output(run)
        old_files = _files(run)
        killed = _kill_after(n, exchange, run)
        if not killed:
            break  # fewer renames than n: the export completed
        recover_interrupted_export(run)
        assert _files(run) in (old_files, NEW_FILES), n
        assert [p.name for p in list_checkpoints(run)] == ["step-00000002"], n
        assert (run / "babelspace_training.json").exists(), n
        assert sorted(p.name for p in run.parent.iterdir()) == ["run"], n
    assert n >= 3  # both kept items moved and the swap itself were each interrupted once


USER_FILES = {"notes.txt": "my notes", "eval/r.json": '{"r": 1}', "eval.json": '{"model": "run"}'}


def _add_user_files(folder: Path) -> Path:
    for name, text in USER_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def _without_user_files(files: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in files.items() if k not in USER_FILES}


def test_export_keeps_the_users_files_and_replaces_what_babelspace_wrote(tmp_path) -> None:
    old = _add_user_files(_old_output(tmp_path / "run"))
    (old / "2_Dense").mkdir()  # an older output's module (no manifest): babelspace's, replaced
    export_model_atomically(_save_new, old, {"step": 4})
    assert _files(old) == {**NEW_FILES, **USER_FILES}
    (old / "custom_module").mkdir()  # listed in the manifest below: babelspace wrote it
    manifest = json.loads((old / "babelspace_files.json").read_text())
    manifest["written"].append("custom_module")
    (old / "babelspace_files.json").write_text(json.dumps(manifest))
    export_model_atomically(_save_new, old, {"step": 5})
    assert not (old / "custom_module").exists()
    assert {k: v for k, v in _files(old).items() if k in USER_FILES} == USER_FILES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_interrupted_export_puts_the_users_files_back(tmp_path, monkeypatch) -> None:
    old = _add_user_files(_old_output(tmp_path / "run"))
    old_files = _files(old)
    monkeypatch.setattr(out_mod, "_swap_in", lambda new, output: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        export_model_atomically(_save_new, old, {"step": 4})
    assert _files(old) == old_files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_kill_at_any_point_of_the_export_keeps_the_users_files(tmp_path, exchange) -> None:
    if exchange and not out_mod._exchange(tmp_path, tmp_path):
        pytest.skip("renameat2 not available here")
    for n in range(1, 10):
        run = _add_user_files(_old_output(tmp_path / f"k{n}" / "run"))
        old_files = _without_user_files(_files(run))
        killed = _kill_after(n, exchange, run)
        recover_interrupted_export(run)
        assert {k: v for k, v in _files(run).items() if k in USER_FILES} == USER_FILES, n
        assert _without_user_files(_files(run)) in (old_files, NEW_FILES), n
        assert sorted(p.name for p in run.parent.iterdir()) == ["run"], n
        if not killed:
            break
    assert n >= 6  # the three user files were each interrupted while being moved


def test_real_model_save_through_atomic_export(tiny_model_dir, tmp_path) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    old = _old_output(tmp_path / "run")
    export_model_atomically(lambda p: model.save(str(p)), old, {"step": 1})
    assert not (old / "1_Pooling" / "config.json").read_text() == "old pooling"
    reloaded = SentenceTransformer(str(old), device="cpu")
    assert reloaded.encode(["hello world"]).shape == (1, 32)
    assert json.loads((old / "babelspace_best.json").read_text()) == {"step": 1}


# ----------------------------------------------------------------------------- issue 25, items 1-4, 12


def test_resume_without_checkpoint_is_refused_and_keeps_the_model(tmp_path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.safetensors").write_text("trained weights")
    (tmp_path / "m" / "babelspace_training.json").write_text("{}")
    with pytest.raises(
        TrainingError, match=r"--resume: no checkpoint in .*m; without --resume a new run needs --overwrite"
    ):
        prepare_output(tmp_path / "m", resume=True, overwrite=False)
    assert (tmp_path / "m" / "model.safetensors").read_text() == "trained weights"
    prepare_output(tmp_path / "new", resume=True, overwrite=False)  # nothing there to lose: a new run


def test_second_run_on_a_locked_output_names_the_holder(tmp_path) -> None:
    import socket
    import subprocess
    import sys

    from babelspace.training.output.lock import output_lock

    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom babelspace.training.output.lock import output_lock\n"
         f"with output_lock({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(
            TrainingError,
            match=rf"--out .*run is in use by another babelspace run \(pid {holder.pid} on host "
            rf"{socket.gethostname()}, since .*\); wait for it",
        ):
            with output_lock(out):
                pass
    finally:
        holder.kill()
        holder.wait()
    with output_lock(out) as lock:  # the kernel released the killed holder's lock
        with output_lock(out):  # re-entrant within a process
            assert lock.exists()
        assert lock.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # lock file and created folder removed


def test_interrupt_inside_the_export_swap_keeps_the_checkpoints(tmp_path, monkeypatch) -> None:
    old = _old_output(tmp_path / "run")
    old_files = _files(old)

    def interrupted(new: Path, output: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(out_mod, "_swap_in", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export_model_atomically(_save_new, old, {"step": 4})
    assert [p.name for p in list_checkpoints(old)] == ["step-00000002"]
    assert (old / "babelspace_training.json").read_text() == "{}"
    assert _files(old) == old_files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_interrupt_between_the_two_renames_restores_the_old_folder(tmp_path, monkeypatch) -> None:
    old = _old_output(tmp_path / "run")
    old_files = _files(old)
    real_replace, calls = os.replace, []

    def replace(a, b):
        calls.append((a, b))
        if len(calls) == 3:  # kept items moved (2), old folder set aside (3): stop before the new one
            real_replace(a, b)
            raise KeyboardInterrupt
        real_replace(a, b)

    monkeypatch.setattr(out_mod, "_exchange", lambda a, b: False)
    monkeypatch.setattr(out_mod.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        export_model_atomically(_save_new, old, {"step": 4})
    monkeypatch.setattr(out_mod.os, "replace", real_replace)
    assert _files(old) == old_files
    assert [p.name for p in list_checkpoints(old)] == ["step-00000002"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_symlinked_output_is_followed_not_replaced(tmp_path) -> None:
    target = _old_output(tmp_path / "disk" / "target")
    link = tmp_path / "link"
    link.symlink_to(target)
    prepare_output(link, resume=True, overwrite=False)
    export_model_atomically(_save_new, link, {"step": 4})
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert _files(target) == NEW_FILES
    assert [p.name for p in list_checkpoints(target)] == ["step-00000002"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "link"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["target"]


def test_full_disk_at_export_cleans_up_and_says_how_much_space(tmp_path) -> None:
    from safetensors import SafetensorError

    old = _old_output(tmp_path / "run")
    old_files = _files(old)

    def save_fills_disk(folder: Path) -> None:
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"x" * 1000)
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")

    with pytest.raises(
        TrainingError,
        match=r"could not save the model to .*run \(No space left on device\): it needs about 87 MB; "
        r"[\d.]+ [KMG]B free on that disk; free space",
    ):
        export_model_atomically(save_fills_disk, old, {"step": 4}, needed_bytes=87 * 2**20)
    assert _files(old) == old_files and list_checkpoints(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_full_disk_at_checkpoint_cleans_up_and_says_how_much_space(tmp_path, monkeypatch) -> None:
    import torch

    from babelspace.checkpoints import checkpoint as ckpt_mod

    save_checkpoint(tmp_path, 2, {"step": 2}, run_id="r")

    def torch_save_fills_disk(obj, fh) -> None:
        fh.write(b"x" * 5000)
        raise RuntimeError("[enforce fail at inline_container.cc:603] . PytorchStreamWriter failed "
                           "writing file data/0: file write failed")  # fmt: skip

    monkeypatch.setattr(ckpt_mod.torch, "save", torch_save_fills_disk)
    state = {"step": 4, "weights": torch.zeros(2**20)}  # 4 MB
    with pytest.raises(
        TrainingError,
        match=r"could not write checkpoint .*step-00000004 \(No space left on device\): it needs about "
        r"4 MB; [\d.]+ [KMG]B free on that disk; free disk space .*; the checkpoint at step 2 is "
        r"intact: rerun with --resume",
    ):
        save_checkpoint(tmp_path, 4, state, run_id="r")
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-00000002"]


def test_a_first_checkpoint_that_does_not_fit_says_there_is_none(tmp_path, monkeypatch) -> None:
    from babelspace.checkpoints import checkpoint as ckpt_mod

    def torch_save_fails(obj, fh) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_mod.torch, "save", torch_save_fails)
    with pytest.raises(TrainingError) as caught:
        save_checkpoint(tmp_path, 2, {"step": 2}, run_id="r")
    assert (
        "no checkpoint was written, so --resume has nothing to continue from: rerun with --overwrite"
        in str(caught.value)
    )
    assert "intact" not in str(caught.value)
    assert not (tmp_path / "checkpoints").exists()  # no empty checkpoints/ left to look like a run


def test_torch_save_error_on_a_disk_too_small_is_reported_as_full(tmp_path, monkeypatch) -> None:
    """torch.save words a full disk variously ("unexpected pos ..."): a disk with less free space
    than the checkpoint needs is named as full."""
    from collections import namedtuple

    import torch

    from babelspace import disk
    from babelspace.checkpoints import checkpoint as ckpt_mod

    def torch_save_fails(obj, fh) -> None:
        fh.write(b"x" * 5000)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64420928 vs 64420816")

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(ckpt_mod.torch, "save", torch_save_fails)
    monkeypatch.setattr(disk.shutil, "disk_usage", lambda p: usage(10 * 2**20, 9 * 2**20, 2**20))
    with pytest.raises(
        TrainingError,
        match=r"\(No space left on device\): it needs about 4 MB; 1 MB free on that disk",
    ):
        save_checkpoint(tmp_path, 4, {"step": 4, "weights": torch.zeros(2**20)}, run_id="r")
    assert not (tmp_path / "checkpoints").exists()  # nothing partial, no empty checkpoints/
