"""Which device each encoding worker uses (``mine --workers N``, ``encode --workers N``).

On a host with several GPUs, ``--device auto`` or ``--device cuda`` spreads the workers over the
GPUs round-robin (worker *i* on ``cuda:(i mod GPUs)``), as sentence-transformers' multi-process
pool does with its target devices; N models on ``cuda:0`` would leave the other GPUs idle. An
explicit ``cuda:K``, ``mps`` or ``cpu`` puts every worker there, and without a GPU ``auto`` keeps
the CPU behaviour (every worker on the CPU, the cores split between them).
"""

from __future__ import annotations

import os

import torch

from babelspace.errors import BabelspaceError


def worker_devices(device: str, workers: int, cuda_devices: int | None = None) -> list[str]:
    """The device of each of ``workers`` encoding processes. ``cuda_devices`` is the number of
    visible GPUs (``torch.cuda.device_count()`` when None; given by tests)."""
    if workers < 1:
        raise BabelspaceError(f"--workers must be at least 1, not {workers}")
    spec = (device or "auto").strip().lower()
    gpus = _visible_gpus() if cuda_devices is None else cuda_devices
    if spec in {"auto", "cuda"} and gpus > 0:
        return [f"cuda:{i % gpus}" for i in range(workers)]
    if spec == "cuda":
        raise BabelspaceError("--device cuda: CUDA is not available on this machine (use --device cpu)")
    return [spec] * workers


def threads_per_worker(devices: list[str]) -> int:
    """CPU threads for each worker: the cores split between the workers that run on the CPU."""
    on_cpu = sum(1 for d in devices if not d.startswith(("cuda", "mps")))
    if on_cpu == 0:
        return 1
    return max(1, (os.cpu_count() or 1) // on_cpu)


def _visible_gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0
