"""One call for everything ``babelspace train`` does: :func:`run` trains ``cfg``
(:func:`~babelspace.training.trainer.train`), then :func:`finish_run` builds the held-out table,
rewrites the model card from the *resolved* config and, when asked, uploads the folder to the Hub.
The CLI parses its flags into a :class:`~babelspace.training.config.TrainConfig`, calls :func:`run`
and prints; a Python user gets the same folder::

    from babelspace.training.config import TrainConfig
    from babelspace.training.run import run

    result = run(TrainConfig(epochs=1, output="runs/de"))
    result.table  # the held-out Bible table (None when --test-sentences 0 or no Bible in --data)
"""

from __future__ import annotations

import logging
import os
import time

from babelspace.hub import check_push_ready
from babelspace.training.config import TrainConfig
from babelspace.training.output.export import exported_shift
from babelspace.training.output.final_table import held_out_table
from babelspace.training.output.model_card import update_model_card
from babelspace.training.output.publish import push_model
from babelspace.training.output.run_log import TrainResult
from babelspace.training.setup.corpora import mix_names
from babelspace.training.trainer import train

logger = logging.getLogger("babelspace")


def run(
    cfg: TrainConfig,
    *,
    command: str | None = None,
    push_to_hub: str | None = None,
    hub_private: bool = False,
) -> TrainResult:
    """Train ``cfg`` and finish the run (:func:`finish_run`). ``command`` is the command line the
    card quotes (None: the card quotes none); ``push_to_hub`` a Hub repository id to upload to."""
    if push_to_hub:
        check_push_ready()  # offline or no token: one line now, not after the run
    result = train(cfg)
    if result.is_main:
        finish_run(result, command=command, push_to_hub=push_to_hub, hub_private=hub_private)
    return result


def finish_run(
    result: TrainResult,
    *,
    command: str | None = None,
    push_to_hub: str | None = None,
    hub_private: bool = False,
) -> TrainResult:
    """After training, on the main process: the held-out table (``result.table``), the model card
    (from ``result.config``, the values the run resolved) and the optional upload
    (``result.pushed_url``). Returns ``result``."""
    cfg = result.config
    if cfg is None:
        raise ValueError("finish_run needs the TrainResult of a run (its config is missing)")
    if cfg.test_sentences and "bible" in mix_names(cfg.data):
        t_table = time.perf_counter()
        result.table = held_out_table(cfg, result.output, shift=exported_shift(result.output))
        result.timings["final_table"] = time.perf_counter() - t_table
    update_model_card(result.output, cfg.to_dict(), result.table, command=command)
    if push_to_hub and os.environ.get("RANK", "0") == "0":  # under torchrun, one upload
        result.pushed_url = push_model(result.output, push_to_hub, private=hub_private)
        logger.info("uploaded %s to %s", result.output, result.pushed_url)
    return result
