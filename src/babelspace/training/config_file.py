"""``babelspace train --config FILE``: the training options of a YAML or JSON file of
:class:`~babelspace.training.config.TrainConfig` field names (or a run log), which flags given on
the command line then override."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The training options of a YAML or JSON file: a mapping of :class:`TrainConfig` field names
    (``recipe`` included), or a run log ``babelspace_training.json`` (its ``config``). Raises
    :class:`TrainingError` naming the file for a missing file, bad syntax or an unknown option."""
    import json

    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except OSError as exc:
        raise TrainingError(f"--config {path}: cannot read it ({exc.strerror or exc})") from exc
    except ValueError as exc:  # json's messages name the line and column
        raise TrainingError(f"--config {path}: not valid JSON: {exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise TrainingError(
            f"--config {path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"
        ) from exc
    if isinstance(data, dict) and isinstance(data.get("config"), dict) and "history" in data:
        data = data["config"]  # a run log: its resolved configuration
    if not isinstance(data, dict):
        raise TrainingError(f"--config {path}: expected a mapping of option names to values")
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise TrainingError(f"--config {path}: unknown training options: {', '.join(unknown)}")
    return {name: _yaml_number(name, value) for name, value in data.items()}


def _yaml_number(name: str, value: Any) -> Any:
    """YAML 1.1 reads ``1e-4`` (no dot) as a string: for a field that takes a number and no string,
    such a string is the number it spells; every other value goes to the config's checks as it is."""
    from babelspace.config_fields import field_types

    members = field_types(TrainConfig)[name]
    if isinstance(value, str) and float in members and str not in members:
        try:
            return float(value)
        except ValueError:
            return value
    return value
