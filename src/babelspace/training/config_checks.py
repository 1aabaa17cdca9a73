"""The checks a :class:`~babelspace.training.config.TrainConfig` runs when it is built: each raises
:class:`TrainingError` naming the flag, so a bad value from Python, a config file or the command
line is one line. Choices and lower bounds come from the fields themselves (``config_fields.py``).
``cfg`` is typed ``Any``: config.py imports this module, so it cannot import the class back."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from babelspace.config_fields import field_types, flag_name, literal_choices
from babelspace.errors import TrainingError


def check_config(cfg: Any, parallel_data: tuple[str, ...]) -> None:
    """Every check below, in order; the first that fails raises. ``parallel_data``: the ``--data``
    an error suggests to the objectives that learn from translation pairs."""
    _check_types(cfg)
    _check_choices(cfg)
    _check_batch_size(cfg)
    _check_seed(cfg)
    _check_bounds(cfg)
    _check_ranges(cfg)
    _check_data(cfg, parallel_data)
    _check_min_score(cfg)
    _check_dev(cfg)
    _check_head_phase(cfg)


def _fits(value: Any, member: Any) -> bool:
    """``value`` is of the annotation ``member`` (one member of a field's union), strictly: an ``int``
    field takes no float (``4.7`` is no step count) and no bool; a ``float`` field takes an ``int``."""
    origin = get_origin(member)
    if member is type(None):
        return value is None
    if origin is Literal:
        return isinstance(value, str)  # which values: _check_choices
    if origin is list:
        (item,) = get_args(member)
        return isinstance(value, list | tuple) and all(_fits(v, item) for v in value)
    if member is bool:
        return isinstance(value, bool)
    if member is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if member is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if member is Path:
        return isinstance(value, str | Path)
    return isinstance(value, member)


def _type_words(members: tuple[Any, ...]) -> str:
    words = {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "a string",
        Path: "a path",
        type(None): "unset (null)",
    }
    out = []
    for m in members:
        if get_origin(m) is Literal:
            out.append(" or ".join(repr(v) for v in get_args(m)))
        elif get_origin(m) is list:
            out.append(f"a list of {words.get(get_args(m)[0], 'items').removeprefix('a ')}s")
        else:
            out.append(words.get(m, getattr(m, "__name__", str(m))))
    return " or ".join(out)


def _check_types(cfg: Any) -> None:
    """Every field holds a value of its annotated type, whether the config came from Python, a
    config file or the command line (whose parser already converts): ``max_steps: 4.7`` or
    ``langs: [[de]]`` are refused here, naming the flag, not later as a traceback."""
    cls = type(cfg)
    for name, members in field_types(cls).items():
        value = getattr(cfg, name)
        if not any(_fits(value, m) for m in members):
            raise TrainingError(f"{flag_name(cls, name)} must be {_type_words(members)}, not {value!r}")


def _check_seed(cfg: Any) -> None:
    """``--seed`` is a seed numpy accepts (0 to 2**32 - 1), refused now rather than after setup."""
    from babelspace.data.apportionment import MAX_SEED

    if not 0 <= cfg.seed <= MAX_SEED:
        raise TrainingError(f"--seed must be between 0 and {MAX_SEED} (numpy's seed range), not {cfg.seed}")


def _check_choices(cfg: Any) -> None:
    """Every ``Literal`` field holds one of its values (the CLI's ``choices`` are the same values)."""
    cls = type(cfg)
    for name, allowed in literal_choices(cls).items():
        value = getattr(cfg, name)
        if value is None and type(None) in field_types(cls)[name]:
            continue
        if value not in allowed:
            raise TrainingError(f"{flag_name(cls, name)} must be one of {', '.join(allowed)}, not {value!r}")


def _check_batch_size(cfg: Any) -> None:
    """``batch_size`` is a whole number >= 1, or ``"auto"`` (probed on the run's device, which must
    be a GPU: :mod:`~babelspace.training.auto_batch`)."""
    if cfg.batch_size == "auto":
        return
    if isinstance(cfg.batch_size, bool) or not isinstance(cfg.batch_size, int) or cfg.batch_size < 1:
        raise TrainingError(f"--batch-size must be a whole number >= 1 or 'auto', not {cfg.batch_size!r}")


def _check_bounds(cfg: Any) -> None:
    """Each field with a ``min`` (included) or ``above`` (excluded) bound is finite and within it;
    ``None`` is "unset"."""
    for f in fields(cfg):
        low, inclusive = (
            (f.metadata["min"], True) if "min" in f.metadata else (f.metadata.get("above"), False)
        )
        value = getattr(cfg, f.name)
        if low is None or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TrainingError(f"{flag_name(type(cfg), f.name)} must be a number, not {value!r}")
        if not math.isfinite(value) or value < low or (value == low and not inclusive):
            rel = ">=" if inclusive else ">"
            raise TrainingError(
                f"{flag_name(type(cfg), f.name)} must be a finite number {rel} {low:g}, not {value!r}"
            )


def _check_ranges(cfg: Any) -> None:
    """The bounded intervals and the one-off rules the per-field bounds do not say."""
    if not 0 < cfg.mask_ratio < 1:
        raise TrainingError(f"--mask-ratio must be in (0, 1), not {cfg.mask_ratio!r}")
    if cfg.warmup_ratio is not None and not 0 <= cfg.warmup_ratio <= 1:
        raise TrainingError(f"--warmup-ratio must be in [0, 1], not {cfg.warmup_ratio!r}")
    if 0 < cfg.decoder_vocab <= 3:
        raise TrainingError(
            f"--decoder-vocab must be 0 (the whole vocabulary) or > 3 (<unk>, BOS, EOS), not {cfg.decoder_vocab}"
        )
    for name in ("denoise_ratio", "decoder_dropout", "contrastive_margin"):
        if not 0 <= getattr(cfg, name) < 1:
            raise TrainingError(f"{flag_name(type(cfg), name)} must be in [0, 1), not {getattr(cfg, name)!r}")
    if not cfg.data:
        raise TrainingError("--data needs at least one corpus")


def _check_head_phase(cfg: Any) -> None:
    """``--head-warmup-steps`` and ``--head-lr`` belong to MEXMA's unmasking head, and the warm-up
    leaves the encoder some steps of the run."""
    if (cfg.head_warmup_steps or cfg.head_lr is not None) and "mexma" not in cfg.objective_names:
        raise TrainingError(
            "--head-warmup-steps and --head-lr set MEXMA's unmasking head: add --objective mexma"
        )
    if cfg.max_steps is not None and cfg.head_warmup_steps >= cfg.max_steps:
        raise TrainingError(
            f"--head-warmup-steps ({cfg.head_warmup_steps}) must be fewer than --max-steps ({cfg.max_steps}): "
            "the encoder trains only after the head's warm-up"
        )


def _check_dev(cfg: Any) -> None:
    """``--dev-pairs 0`` trains without a dev set (a corpus too small to spare one): no dev score can
    pick a best step, so the run exports its last step (``--model-from final``)."""
    if cfg.dev_pairs == 0 and cfg.model_from != "final":
        raise TrainingError(
            "--dev-pairs 0 trains without a dev set, so no dev score can pick the best step: "
            "pass --model-from final (the last step's weights are saved)"
        )


def _check_min_score(cfg: Any) -> None:
    """``--min-score`` is a finite number and some ``--data`` corpus is ``babelspace mine`` output."""
    if cfg.min_score is None:
        return
    if not math.isfinite(cfg.min_score):
        raise TrainingError(f"--min-score must be a finite number, not {cfg.min_score!r}")
    from babelspace.data.mined import is_mined_file
    from babelspace.data.mix import local_paths

    if not any(p.is_file() and is_mined_file(p) for p in local_paths(cfg.data)):
        raise TrainingError(
            "--min-score keeps mined pairs by their margin score, but no --data corpus is `babelspace mine` "
            "output (score<TAB>src<TAB>tgt)"
        )


def _check_data(cfg: Any, parallel_data: tuple[str, ...]) -> None:
    """English-only sources (each row a sentence paired with itself) only with ``distill`` alone:
    for MEXMA, contrastive and the bottleneck an (s, s) pair is a trivial positive or plain copying."""
    from babelspace.data.mix import DataMixError, parse_data_mix
    from babelspace.data.sources import SOURCES

    pair_objectives = [n for n in cfg.objective_names if n != "distill"]
    if not pair_objectives:
        return
    try:
        mix = parse_data_mix(cfg.data)
    except DataMixError:
        return  # reported with its item when the run reads the mix
    mono = [n for n, _ in mix if n in SOURCES and SOURCES[n].items is not None]
    if mono:
        raise TrainingError(
            f"--data {' '.join(mono)}: English-only rows (a sentence paired with itself) train only "
            f"--objective distill, not {', '.join(pair_objectives)}; give translation pairs (default: "
            f"{' '.join(parallel_data)})"
        )
