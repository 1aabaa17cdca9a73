"""Device and precision resolution, and a static guard that no compute path pins the CPU."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest
import torch

from babelspace.device import resolve_device, resolve_precision
from babelspace.errors import BabelspaceError

SRC = Path(__file__).resolve().parents[2] / "src" / "babelspace"


@pytest.fixture
def no_accelerators(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("babelspace.device._mps_available", lambda: False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch, no_accelerators) -> None:
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr("babelspace.device._mps_available", lambda: True)
    assert resolve_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device(None) == torch.device("cuda")


def test_torchrun_rank_picks_its_own_gpu(monkeypatch, no_accelerators) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert resolve_device("auto") == torch.device("cuda:3")
    assert resolve_device("cuda") == torch.device("cuda:3")
    assert resolve_device("cuda:1") == torch.device("cuda:1")  # explicit index wins


def test_missing_or_bad_devices_are_clear_errors(no_accelerators) -> None:
    with pytest.raises(BabelspaceError, match="CUDA is not available"):
        resolve_device("cuda")
    with pytest.raises(BabelspaceError, match="MPS is not available"):
        resolve_device("mps")
    with pytest.raises(BabelspaceError, match="not a device"):
        resolve_device("gpu7")


def test_precision_auto_and_fp16_on_cpu(monkeypatch) -> None:
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert resolve_precision("bf16", torch.device("cpu")) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_precision("auto", torch.device("cuda")) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_precision("auto", torch.device("cuda")) == "fp16"
    with pytest.raises(BabelspaceError, match="fp16 needs a GPU"):
        resolve_precision("fp16", torch.device("cpu"))
    with pytest.raises(BabelspaceError, match="--precision"):
        resolve_precision("fp8", torch.device("cpu"))


def test_train_cli_device_error_is_one_line(no_accelerators, capsys) -> None:
    from babelspace.cli import main

    assert main(["train", "--device", "cuda", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CUDA is not available" in err[0]


# Where a literal "cpu" / ``.cpu()`` is legitimate, and why. Anything else is a compute path that
# would silently leave a GPU idle: move it to the model's/tensor's device instead.
ALLOWED_CPU_LITERALS = {
    "device.py": 3,  # the device names themselves ("auto" falls back to "cpu"; fp16 is refused there)
    "training/distributed.py": 1,  # tells accelerate that the chosen device is the CPU
    "checkpoints/checkpoint.py": 1,  # serialisation: torch.load(map_location="cpu")
    "objectives/decoding.py": 1,  # serialisation: torch.load(map_location="cpu")
    "objectives/parts/masking.py": 2,  # masks are drawn on the CPU so every device draws the same masks
    "resources/e5_small.py": 1,  # materialisation: weights are built once and saved to disk
    "models/backends.py": 4,  # ONNX Runtime / OpenVINO exports: CPU runtimes by definition
    "training/output/model_card.py": 2,  # loads a saved folder only to write its README (no compute)
    "training/batches.py": 1,  # a loader worker collates into CPU tensors (pinned, then copied to the device)
    "objectives/parts/noise.py": 3,  # collate-time token noise on the host; the batch then moves to the device
    "checkpoints/files.py": 2,  # serialisation: torch.load / safetensors load_file onto the host
    # the process pool's parent loads the model once on the host; each worker moves it to its device
    "mining/encode.py": 2,
}


def _cpu_literals(path: Path) -> int:
    count = 0
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.STRING and tok.string.strip("\"'") == "cpu":
            count += 1
        if tok.type == tokenize.NAME and tok.string == "cpu" and i > 0 and tokens[i - 1].string == ".":
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            count += int(nxt is not None and nxt.string == "(")
    return count


def test_no_compute_path_pins_the_cpu() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        n = _cpu_literals(path)
        if n:
            found[path.relative_to(SRC).as_posix()] = n
    unexpected = {k: v for k, v in found.items() if v > ALLOWED_CPU_LITERALS.get(k, 0)}
    assert not unexpected, (
        f'new literal "cpu" / .cpu() in compute code: {unexpected} (see ALLOWED_CPU_LITERALS)'
    )
