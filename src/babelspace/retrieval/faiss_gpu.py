"""faiss indexes on a GPU when the installed faiss has GPU support.

``faiss-cpu`` is what babelspace installs. A GPU build of faiss (conda's ``faiss-gpu``, or pip's
``faiss-gpu-cu12`` in place of ``faiss-cpu``; README, "Installing") exposes
``faiss.StandardGpuResources``; when it does and a GPU is visible, :func:`on_gpu` copies each index
the kNN search (:func:`babelspace.retrieval.knn.knn_search`) and mining
(:mod:`babelspace.mining.search`) build onto the GPU. The results are the same indexes' results;
only where they run changes. ``BABELSPACE_FAISS_GPU=0`` keeps every index on the CPU. The GPU is
the process's local rank modulo the visible GPUs (one per process under torchrun).
"""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["faiss_gpu_count", "on_gpu"]

logger = logging.getLogger(__name__)

_resources: dict[int, Any] = {}  # one StandardGpuResources per GPU, made on first use


def faiss_gpu_count() -> int:
    """GPUs faiss can use: 0 for faiss-cpu, with no visible GPU, or with ``BABELSPACE_FAISS_GPU=0``."""
    import faiss

    if os.environ.get("BABELSPACE_FAISS_GPU", "1").strip() == "0":
        return 0
    if not hasattr(faiss, "StandardGpuResources") or not hasattr(faiss, "get_num_gpus"):
        return 0
    return int(faiss.get_num_gpus())


def on_gpu(index: Any) -> Any:
    """``index`` copied onto this process's GPU, or ``index`` itself when faiss has no GPU (or the
    index type has no GPU version, which is logged)."""
    n = faiss_gpu_count()
    if n == 0:
        return index
    import faiss

    device = int(os.environ.get("LOCAL_RANK", "0")) % n
    if device not in _resources:
        _resources[device] = faiss.StandardGpuResources()
    try:
        return faiss.index_cpu_to_gpu(_resources[device], device, index)
    except RuntimeError as exc:  # e.g. an IVFPQ code size the GPU kernels lack
        logger.warning("faiss: %s stays on the CPU (%s)", type(index).__name__, str(exc).splitlines()[0])
        return index
