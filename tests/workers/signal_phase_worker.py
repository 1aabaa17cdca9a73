"""Run by tests/cli/test_cli_signals.py: ``babelspace ARGS`` as the CLI runs it, paused in one phase so
that the test can send a real signal there. ``BABELSPACE_TEST_PAUSE=PHASE`` names the phase:

* ``arrow``: inside the Arrow conversion (a partial file already in its temporary folder);
* ``teacher``: where the teacher vectors are encoded;
* ``step``: after training step 2 (the trainer's own handler: checkpoint, exit 2);
* ``export``: in the final export, after the model was written beside ``--out`` and before the swap;
* ``mine``: where ``babelspace mine`` encodes its two sides.

The worker prints ``paused`` on stdout once there, then waits (a minute at most).
"""

from __future__ import annotations

import os
import sys
import time

from babelspace.cli import main


def _pause(stop=lambda: False) -> None:  # type: ignore[no-untyped-def]
    print("paused", flush=True)
    for _ in range(600):
        if stop():
            return
        time.sleep(0.1)


def _hook(phase: str) -> None:
    if phase == "arrow":
        from babelspace.data import arrow_corpus

        def convert(chunks, folder, *args, **kwargs):  # type: ignore[no-untyped-def]
            (folder / "pairs.arrow").write_bytes(b"\0" * 4096)
            _pause()

        arrow_corpus._convert = convert
    elif phase == "teacher":
        from babelspace.training import trainer

        trainer.teacher_targets = lambda *args, **kwargs: _pause()
    elif phase == "step":
        from babelspace.training import trainer

        original = trainer.Trainer._step

        def step(self, progress):  # type: ignore[no-untyped-def]
            out = original(self, progress)
            if progress.step == 2:
                _pause(lambda: self._stop_signal is not None)
            return out

        trainer.Trainer._step = step
    elif phase == "export":
        from babelspace.training import trainer
        from babelspace.training.output import folder

        finish, swap = trainer.Trainer._finish, folder._swap_in
        finishing = []

        def finish_then_mark(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            finishing.append(True)
            return finish(self, *args, **kwargs)

        def swap_in(new, output):  # type: ignore[no-untyped-def]
            if finishing:
                _pause()
            return swap(new, output)

        trainer.Trainer._finish, folder._swap_in = finish_then_mark, swap_in
    elif phase == "mine":
        from babelspace.mining import pipeline

        pipeline._encode_sides = lambda *args, **kwargs: _pause()


if __name__ == "__main__":
    _hook(os.environ["BABELSPACE_TEST_PAUSE"])
    sys.exit(main(sys.argv[1:]))
