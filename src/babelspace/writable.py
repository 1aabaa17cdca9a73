"""Whether a folder accepts a new file: the one write probe behind every "is this writable" check
(output folder, caches, ``--out`` files), so each caller only words its own error."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

#: Name prefix of the probe files (a listing of a folder may skip them).
PROBE_PREFIX = ".babelspace-write-test"


def write_error(folder: Path) -> OSError | None:
    """The error a new file in ``folder`` meets (``None`` if it can be written and removed)."""
    probe = Path(folder) / f"{PROBE_PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return exc
    return None
