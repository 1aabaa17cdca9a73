"""Which device and precision a command runs on (``--device``, ``--precision``).

``auto`` picks ``cuda`` when available (``cuda:$LOCAL_RANK`` under torchrun), else ``mps``, else
``cpu``; every command and the Python API resolve their device here, so nothing assumes the CPU.
"""

from __future__ import annotations

import os

import torch

from babelspace.errors import BabelspaceError

DEVICE_CHOICES = "auto, cpu, cuda, cuda:N or mps"
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def _local_rank() -> int | None:
    value = os.environ.get("LOCAL_RANK")
    return int(value) if value is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1 else None


def resolve_device(spec: str | None = "auto") -> torch.device:
    """``auto`` = ``cuda`` when available (``cuda:$LOCAL_RANK`` under torchrun), else ``mps``, else
    ``cpu``. An explicit device that this machine lacks is a :class:`BabelspaceError`."""
    spec = (spec or "auto").strip().lower()
    rank = _local_rank()
    if spec == "auto":
        if torch.cuda.is_available():
            spec = f"cuda:{rank}" if rank is not None else "cuda"
        elif _mps_available():
            spec = "mps"
        else:
            spec = "cpu"
    elif spec == "cuda" and rank is not None:
        spec = f"cuda:{rank}"
    try:
        device = torch.device(spec)
    except (RuntimeError, ValueError) as exc:
        raise BabelspaceError(f"--device {spec!r} is not a device; use {DEVICE_CHOICES}") from exc
    if device.type not in {"cpu", "cuda", "mps"}:
        raise BabelspaceError(f"--device {spec!r} is not supported; use {DEVICE_CHOICES}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise BabelspaceError(
                f"--device {spec}: CUDA is not available on this machine (use --device cpu)"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise BabelspaceError(
                f"--device {spec}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    if device.type == "mps" and not _mps_available():
        raise BabelspaceError(f"--device {spec}: MPS is not available on this machine (use --device cpu)")
    return device


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_precision(spec: str | None, device: torch.device) -> str:
    """``auto`` = bf16 on a GPU that supports it, fp16 on older GPUs, fp32 elsewhere (bf16 on a CPU
    without bf16 units is two orders of magnitude slower than fp32: docs/performance.md)."""
    spec = (spec or "auto").lower()
    if spec not in PRECISIONS:
        raise BabelspaceError(f"--precision must be one of {', '.join(PRECISIONS)}, not {spec!r}")
    if spec == "auto":
        if device.type == "cuda":
            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return "fp32"
    if spec == "fp16" and device.type == "cpu":
        raise BabelspaceError(
            "--precision fp16 needs a GPU (its loss scaler is CUDA/MPS-only); use bf16 or fp32"
        )
    return spec
