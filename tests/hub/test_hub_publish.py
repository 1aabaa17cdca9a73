"""Publishing to the Hugging Face Hub (babelspace.hub), with the Hub client mocked at its boundary:
``huggingface_hub.HfApi`` (create_repo, upload_folder) and ``huggingface_hub.get_token``."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from typing import Any

import pytest

from babelspace.cli import main
from babelspace.hub import HubError, check_push_ready, hub_offline
from babelspace.training.output.model_card import CARD_INPUTS, update_model_card
from babelspace.training.output.publish import push_model

CFG = {
    "student": "e5-small",
    "teacher": "minilm",
    "objective": "distill",
    "data": ["bible"],
    "langs": ["de"],
    "output": "output/babelspace-student",
}
ROWS = [{"lang": "mean", "before xx>en": 40.0, "after xx>en": 91.5, "after xx>T(en)": 88.25}]


class FakeHub:
    """Stands in for ``huggingface_hub.HfApi``: records the calls and the files and card as uploaded."""

    calls: list[tuple[str, dict[str, Any]]] = []
    uploaded_card = ""
    uploaded_files: list[str] = []
    fail_with: BaseException | None = None

    def create_repo(self, repo_id: str, **kw: Any) -> str:
        FakeHub.calls.append(("create_repo", {"repo_id": repo_id, **kw}))
        if FakeHub.fail_with is not None:
            raise FakeHub.fail_with
        return f"https://huggingface.co/{repo_id}"

    def create_commit(self, **kw: Any) -> None:
        FakeHub.calls.append(("create_commit", kw))
        ops = {op.path_in_repo: op.path_or_fileobj for op in kw["operations"]}
        FakeHub.uploaded_card = ops["README.md"].decode() if isinstance(ops["README.md"], bytes) else ""
        FakeHub.uploaded_files = sorted(ops)


@pytest.fixture()
def hub(monkeypatch: pytest.MonkeyPatch) -> type[FakeHub]:
    import huggingface_hub

    FakeHub.calls, FakeHub.uploaded_card, FakeHub.uploaded_files, FakeHub.fail_with = [], "", [], None
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHub)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_test")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    return FakeHub


@pytest.fixture()
def trained_folder(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """A folder as ``babelspace train`` leaves it: the model, its card (and card inputs), checkpoints."""
    folder = tmp_path / "student"
    shutil.copytree(tiny_model_dir, folder)
    update_model_card(folder, CFG, ROWS, "babelspace train --langs de")
    (folder / "checkpoints" / "step-3").mkdir(parents=True)
    (folder / "checkpoints" / "step-3" / "optimizer.pt").write_bytes(b"x")
    return folder


@pytest.mark.parametrize(
    ("value", "offline"),
    [("1", True), ("true", True), ("YES", True), ("On", True), ("0", False), ("false", False), ("", False)],
)
def test_hf_hub_offline_is_read_as_huggingface_hub_reads_it(
    monkeypatch: pytest.MonkeyPatch, value: str, offline: bool
) -> None:
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert hub_offline() is offline


def test_push_uploads_the_folder_with_a_card_naming_the_repo(
    hub: type[FakeHub], trained_folder: Path
) -> None:
    assert 'SentenceTransformer("output/babelspace-student")' in (trained_folder / "README.md").read_text()
    url = push_model(trained_folder, "acme/babel-de", private=True)
    assert url == "https://huggingface.co/acme/babel-de"
    (name, create), (name2, upload) = hub.calls
    assert name == "create_repo" and create["repo_id"] == "acme/babel-de" and create["private"] is True
    assert create["exist_ok"] is True
    assert name2 == "create_commit" and upload["repo_id"] == "acme/babel-de"
    assert "modules.json" in hub.uploaded_files and "README.md" in hub.uploaded_files
    assert not any(f.startswith("checkpoints/") for f in hub.uploaded_files)  # stays local
    card = hub.uploaded_card
    assert (trained_folder / "README.md").read_text() == card  # written locally once uploaded
    assert 'SentenceTransformer("acme/babel-de")' in card  # the usage snippet
    assert 'output/babelspace-student")' not in card
    assert "# acme/babel-de: babelspace distill student" in card  # title
    assert "- name: 'acme/babel-de: babelspace distill student" in card  # model-index metadata
    assert "base_model: intfloat/multilingual-e5-small" in card and "value: 91.5" in card
    assert CARD_INPUTS in hub.uploaded_files


def test_push_cli_passes_private_and_rejects_a_bad_repo_id(
    hub: type[FakeHub], trained_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["push", str(trained_folder), "acme/m", "--hub-private"]) == 0
    assert hub.calls[0][1]["private"] is True
    assert "uploaded" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["push", str(trained_folder), "no-org"])


def test_push_refuses_offline_or_without_token(
    hub: type[FakeHub], trained_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "true")
    with pytest.raises(HubError, match="HF_HUB_OFFLINE"):
        push_model(trained_folder, "acme/m")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    with pytest.raises(HubError, match="no Hugging Face token"):
        check_push_ready()
    assert hub.calls == []


def test_push_of_a_plain_sentence_transformers_folder(
    hub: type[FakeHub], tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "plain"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "README.md").unlink(missing_ok=True)
    push_model(folder, "acme/plain")
    assert 'SentenceTransformer("acme/plain")' in hub.uploaded_card


def test_train_push_to_hub_uploads_after_training(
    hub: type[FakeHub], tiny_teacher_dir: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """A 2-step ``babelspace train --push-to-hub`` on tiny models: one upload, its card naming the repo."""
    from tests.training.test_training_trainer import write_corpus

    corpus = write_corpus(tmp_path / "pairs.tsv")
    out = tmp_path / "run"
    argv = [
        "train", "--teacher", str(tiny_teacher_dir), "--student", str(tiny_model_dir),
        "--data", str(corpus), "--tgt-lang", "de", "--max-steps", "2", "--batch-size", "8",
        "--eval-every", "2", "--dev-pairs", "16", "--projection-fit-pairs", "64", "--max-seq-length", "16",
        "--test-sentences", "0", "--threads", "1", "--cache-dir", str(tmp_path / "cache"), "--out", str(out),
        "--push-to-hub", "acme/tiny", "--hub-private",
    ]  # fmt: skip
    assert main(argv) == 0
    assert [name for name, _ in hub.calls] == ["create_repo", "create_commit"]
    assert hub.calls[0][1]["private"] is True and "model.safetensors" in hub.uploaded_files
    assert (
        'SentenceTransformer("acme/tiny")' in hub.uploaded_card
        and "# acme/tiny: babelspace" in hub.uploaded_card
    )


def test_train_push_to_hub_offline_fails_in_one_line_before_training(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import babelspace.training.run as run_module

    def no_training(cfg: Any) -> None:
        raise AssertionError("training started")

    monkeypatch.setattr(run_module, "train", no_training)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["train", "--push-to-hub", "acme/m", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--push-to-hub" in err and "HF_HUB_OFFLINE" in err


def test_push_with_the_hub_unreachable_is_one_line_and_leaves_the_card(
    hub: type[FakeHub], trained_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 11: a token but no Hub: one line (not the HTTP client's traceback), the local
    README.md as it was."""
    from huggingface_hub.errors import HfHubHTTPError

    client_error = next(c for c in HfHubHTTPError.__mro__ if c.__name__ == "HTTPError")  # httpx's
    connect_error = importlib.import_module(client_error.__module__.split(".")[0]).ConnectError
    before = (trained_folder / "README.md").read_bytes()
    hub.fail_with = connect_error("[Errno 111] Connection refused")
    assert main(["push", str(trained_folder), "acme/m"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "ConnectError" in err and "acme/m" in err and "nothing was published" in err
    assert (trained_folder / "README.md").read_bytes() == before
    hub.fail_with = OSError("Network is unreachable")
    with pytest.raises(HubError, match="Network is unreachable"):
        push_model(trained_folder, "acme/m")
    assert (trained_folder / "README.md").read_bytes() == before


def test_push_to_a_closed_port_with_the_real_client(
    trained_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same through huggingface_hub itself, pointed at a local port nothing listens on."""
    import socket

    import huggingface_hub
    from huggingface_hub import constants

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: a refused connection
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_test")
    before = (trained_folder / "README.md").read_bytes()
    assert main(["push", str(trained_folder), "acme/m"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "push to acme/m failed" in err, err
    assert (trained_folder / "README.md").read_bytes() == before


@pytest.mark.parametrize("bad", ["no-org", "a/b/c", "acme/-x", "acme/a..b", "acme/" + "x" * 97, "ac me/x"])
def test_repo_ids_are_checked_by_huggingface_hub(bad: str) -> None:
    import argparse

    from babelspace.hub import hub_repo_id

    assert hub_repo_id("acme/babel-de.v2") == "acme/babel-de.v2"
    with pytest.raises(argparse.ArgumentTypeError, match="ORG/NAME"):
        hub_repo_id(bad)


def test_train_push_to_hub_with_the_hub_unreachable_is_one_line(
    hub: type[FakeHub], tiny_teacher_dir: Path, tiny_model_dir: Path, tmp_path: Path, capsys
) -> None:
    """Issue 35 item 11 for ``train --push-to-hub``: the model is saved with its local card, the
    failed upload is one line naming the retry command."""
    from tests.training.test_training_trainer import write_corpus

    corpus = write_corpus(tmp_path / "pairs.tsv")
    out = tmp_path / "run"
    argv = [
        "train", "--teacher", str(tiny_teacher_dir), "--student", str(tiny_model_dir),
        "--data", str(corpus), "--tgt-lang", "de", "--max-steps", "2", "--batch-size", "8",
        "--eval-every", "2", "--dev-pairs", "16", "--projection-fit-pairs", "64", "--max-seq-length", "16",
        "--test-sentences", "0", "--threads", "1", "--cache-dir", str(tmp_path / "cache"), "--out", str(out),
        "--push-to-hub", "acme/tiny",
    ]  # fmt: skip
    hub.fail_with = OSError("[Errno 101] Network is unreachable")
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("babelspace:")]
    assert (
        len(err) == 1
        and "push to acme/tiny failed" in err[0]
        and f"babelspace push {out} acme/tiny" in err[0]
    )
    card = (out / "README.md").read_text()
    assert 'SentenceTransformer("acme/tiny")' not in card and "# acme/tiny:" not in card  # the local card
    assert (out / "model.safetensors").is_file()
