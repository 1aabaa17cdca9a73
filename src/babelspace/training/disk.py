"""What a write that failed (a full disk, most often) tells the user: how much space it needed and
how much the disk has, so the one-line error says what to free."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["failure_reason", "format_size", "space_message"]


def space_message(folder: Path, needed_bytes: int | None) -> str:
    """``"it needs about N MB; M MB free on that disk"`` for a write into ``folder`` that failed."""
    folder = Path(folder)
    probe = next((p for p in [folder, *folder.parents] if p.exists()), None)
    try:
        free = shutil.disk_usage(probe).free if probe is not None else None
    except OSError:
        free = None
    parts = []
    if needed_bytes:
        parts.append(f"it needs about {format_size(needed_bytes)}")
    if free is not None:
        parts.append(f"{format_size(free)} free on that disk")
    return "; ".join(parts) or "space unknown"


def format_size(n: int) -> str:
    """``n`` bytes as "1.5 GB", "87 MB" or "12 KB"."""
    if n >= 2**30:
        return f"{n / 2**30:.1f} GB"
    if n >= 2**20:
        return f"{n / 2**20:.0f} MB"
    return f"{max(1, round(n / 2**10))} KB"


def failure_reason(exc: BaseException) -> str:
    """One line for a failed write: the OS error, or "No space left on device" for the full-disk
    errors that safetensors (``SafetensorError``) and ``torch.save`` (``RuntimeError``) raise."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip()
    if any(s in text for s in ("No space left", "StorageFull", "file write failed")):
        return "No space left on device"
    return (text.splitlines() or [type(exc).__name__])[-1][:200]
