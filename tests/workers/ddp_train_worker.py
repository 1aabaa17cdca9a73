"""Run by tests/training/test_training_distributed.py under ``torchrun --nproc_per_node 2`` (gloo, CPU): ``babelspace
train`` as the CLI runs it, with two test hooks read from the environment:

* ``BABELSPACE_TEST_SIGNAL=RANK:STEP:SIGNAL``: that rank sends itself a real signal (``TERM``,
  ``KILL``) once it has finished step STEP (the other rank receives nothing);
* ``BABELSPACE_TEST_WRITES=DIR``: every file this rank opens for writing, renames or creates a
  folder for under ``--output`` is listed in ``DIR/rank-<RANK>.json`` (a Python audit hook).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
from pathlib import Path

import babelspace.training.trainer as trainer_module
from babelspace.cli import main

RANK = int(os.environ.get("RANK", "0"))


def _signal_after(rank: int, step: int, signum: int) -> None:
    original = trainer_module.Trainer._step

    def step_then_signal(self, progress):  # type: ignore[no-untyped-def]
        out = original(self, progress)
        if RANK == rank and progress.step == step:
            os.kill(os.getpid(), signum)
        return out

    trainer_module.Trainer._step = step_then_signal  # type: ignore[method-assign]


def _record_writes(folder: Path, output: Path) -> None:
    seen: list[str] = []
    output = output.resolve()
    roots = (str(output), str(output.parent / f".{output.name}."))  # the folder and its export swaps

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], (str, os.PathLike)):
            mode, flags = args[1] or "", args[2] or 0
            writes = any(c in str(mode) for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR)
            if writes and str(os.path.abspath(args[0])).startswith(roots):
                seen.append(f"open {os.path.abspath(args[0])}")
        elif event in {"os.rename", "os.mkdir", "os.remove", "shutil.rmtree"} and args:
            path = str(os.path.abspath(os.fspath(args[0])))
            if path.startswith(roots):
                seen.append(f"{event} {path}")

    sys.addaudithook(hook)
    atexit.register(lambda: (folder / f"rank-{RANK}.json").write_text(json.dumps(seen)))


if __name__ == "__main__":
    argv = sys.argv[1:]
    if os.environ.get("BABELSPACE_TEST_SIGNAL"):
        r, s, name = os.environ["BABELSPACE_TEST_SIGNAL"].split(":")
        _signal_after(int(r), int(s), getattr(signal, f"SIG{name}"))
    if os.environ.get("BABELSPACE_TEST_WRITES"):
        _record_writes(Path(os.environ["BABELSPACE_TEST_WRITES"]), Path(argv[argv.index("--out") + 1]))
    sys.exit(main(argv))
