"""Progress when stderr is not a terminal: periodic one-line log records with rate and ETA."""

from __future__ import annotations

import io
import logging

from babelspace.progress import Progress


def test_non_tty_progress_logs_lines_with_eta(monkeypatch, caplog) -> None:
    monkeypatch.setenv("BABELSPACE_PROGRESS_INTERVAL", "1")
    clock = {"t": 0.0}
    monkeypatch.setattr("babelspace.progress.time.monotonic", lambda: clock["t"])
    stream = io.StringIO()  # not a TTY
    with caplog.at_level(logging.INFO, logger="babelspace.progress"):
        bar = Progress(total=10, desc="train", unit="step", file=stream)
        for _ in range(10):
            clock["t"] += 0.3
            bar.update(1)
            bar.set_postfix(loss="0.1")
        bar.close()
    lines = [r.getMessage() for r in caplog.records]
    assert stream.getvalue().strip() == ""  # no carriage-return bar on the stream
    assert 2 <= len(lines) <= 6  # throttled: not one line per update
    assert lines[-1].startswith("train: 100%") and "10/10" in lines[-1]
    assert all("\r" not in line for line in lines)
    assert any("<" in line for line in lines)  # tqdm's elapsed<remaining (the ETA)
