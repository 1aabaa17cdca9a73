"""What a write that failed (a full disk, most often) tells the user: how much space it needed and
how much the disk has, so the one-line error says what to free."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["failure_reason", "format_size", "free_bytes", "space_message"]


def space_message(folder: Path, needed_bytes: int | None) -> str:
    """``"it needs about N MB; M MB free on that disk"`` for a write into ``folder`` that failed."""
    free = free_bytes(folder)
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


def free_bytes(folder: Path) -> int | None:
    """Free bytes on the disk of ``folder`` (or of its nearest existing parent)."""
    folder = Path(folder)
    probe = next((p for p in [folder, *folder.parents] if p.exists()), None)
    try:
        return shutil.disk_usage(probe).free if probe is not None else None
    except OSError:
        return None


def failure_reason(exc: BaseException, folder: Path | None = None, needed_bytes: int | None = None) -> str:
    """One line for a failed write: the OS error, or "No space left on device" for the full-disk
    errors that safetensors (``SafetensorError``) and ``torch.save`` (``RuntimeError``, worded
    variously) raise, also when the disk of ``folder`` has less free space than ``needed_bytes``."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip()
    if any(s in text for s in ("No space left", "StorageFull", "file write failed")):
        return "No space left on device"
    free = free_bytes(folder) if folder is not None and needed_bytes else None
    if free is not None and needed_bytes and free < needed_bytes:
        return "No space left on device"
    return (text.splitlines() or [type(exc).__name__])[-1][:200]
