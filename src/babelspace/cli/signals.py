"""SIGTERM is handled as SIGINT is, in every phase of every command: it raises :class:`Terminated`
(a :class:`KeyboardInterrupt`), so the same ``finally`` and ``except BaseException`` blocks that
clean up after Ctrl-C remove temporary files, release the output lock and remove an output folder
the run created but never wrote into; :func:`interrupt_line` is the one line the CLI then prints.

Inside the training step loop the trainer installs its own handler for both signals (finish the
step, write a checkpoint, stop with exit code 2); outside it, SIGINT exits 130 and SIGTERM 143
(128 + the signal number, what a shell reports for a process killed by it).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Terminated", "exit_code", "interrupt_line", "sigterm_as_interrupt"]


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (raised in the main thread, wherever it was)."""

    signum = signal.SIGTERM


def _raise_terminated(signum: int, _frame: object, owner: int) -> None:
    if os.getpid() != owner:  # a forked child inherited the handler: die as the signal asks
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise Terminated()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()
    previous = signal.signal(signal.SIGTERM, lambda s, f: _raise_terminated(s, f, owner))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_code(exc: KeyboardInterrupt) -> int:
    """130 after SIGINT (Ctrl-C), 143 after SIGTERM."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def interrupt_line(exc: KeyboardInterrupt) -> str:
    """``babelspace: interrupted by SIGTERM; ...`` with what the command noted about its state
    (``exc.add_note``: what was kept and how to continue)."""
    name = signal.Signals(getattr(exc, "signum", signal.SIGINT)).name
    return "; ".join([f"babelspace: interrupted by {name}", *getattr(exc, "__notes__", [])])
