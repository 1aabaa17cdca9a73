"""Progress of long work that a user sees in a terminal *and* in a log.

On a terminal, :class:`Progress` is an ordinary tqdm bar. When stderr is not a terminal (CI, nohup,
a notebook's captured output, a job scheduler) tqdm's carriage-return updates pile up on one
unreadable line or are switched off; :class:`Progress` then writes one plain log line every
``BABELSPACE_PROGRESS_INTERVAL`` seconds (default 30) and at the end, with rate and ETA::

    train:  33%|###3      | 40/120 [01:05<02:10,  0.61step/s, loss=0.4123]
"""

from __future__ import annotations

import io
import logging
import os
import sys
import time
from typing import Any

from tqdm.auto import tqdm

logger = logging.getLogger("babelspace.progress")

DEFAULT_INTERVAL_S = 30.0


def _interval() -> float:
    try:
        return max(1.0, float(os.environ.get("BABELSPACE_PROGRESS_INTERVAL", DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


class Progress(tqdm):
    """tqdm on a terminal; periodic one-line log records otherwise (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        stream = kwargs.get("file") or sys.stderr
        self._lines = not (hasattr(stream, "isatty") and stream.isatty())
        self._every = _interval()
        self._logged_at = -float("inf")
        self._logged_n = -1
        if self._lines:
            kwargs["file"] = io.StringIO()  # tqdm's own writes (the newline of close) stay out of the log
            kwargs["mininterval"] = kwargs["maxinterval"] = self._every
            kwargs.setdefault("ascii", True)
            kwargs.pop("disable", None)
        super().__init__(*args, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool | None:
        if not self._lines:
            return super().display(msg, pos)
        now = time.monotonic()
        if now - self._logged_at >= self._every:
            self._log(msg)
        return True

    def _log(self, msg: str | None = None) -> None:
        logger.info("%s", msg if msg is not None else self.__str__())
        self._logged_at, self._logged_n = time.monotonic(), self.n

    def close(self) -> None:
        if self._lines and not self.disable and self.n != self._logged_n:
            self._log()
        super().close()
