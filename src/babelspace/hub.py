"""The Hugging Face Hub seen from babelspace: its offline switch, repository ids, and whether a push
can happen (:func:`check_push_ready`, run before any training so an offline machine or a missing
token fails in one line instead of after the run). The upload itself: :mod:`babelspace.training.output.publish`."""

from __future__ import annotations

import argparse
import os

from babelspace.errors import BabelspaceError, first_error_line

__all__ = [
    "HubError",
    "check_push_ready",
    "hub_offline",
    "hub_repo_id",
]


class HubError(BabelspaceError):
    """Publishing to the Hub cannot go on (offline, no token, a refused upload)."""


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) read as huggingface_hub reads it: 1, true, yes
    or on, in any case. Read from the environment at call time (huggingface_hub's own constant is fixed
    when it is imported)."""
    from huggingface_hub.constants import ENV_VARS_TRUE_VALUES

    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in ENV_VARS_TRUE_VALUES


def hub_repo_id(value: str) -> str:
    """argparse type of ``--push-to-hub`` / ``push``'s target: ``ORG/NAME``, checked by
    huggingface_hub's own ``validate_repo_id`` (a name without its ``ORG/`` is refused too: the
    repository would land under whichever account the token belongs to)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    problem = None if value.count("/") == 1 else "it has no ORG/ part"
    if problem is None:
        try:
            validate_repo_id(value)
        except HFValidationError as exc:
            problem = first_error_line(exc)
    if problem:
        raise argparse.ArgumentTypeError(f"expected a Hub repository id ORG/NAME, got {value!r}: {problem}")
    return value


def check_push_ready(flag: str = "--push-to-hub") -> None:
    """Fail now, in one line, when a push could not happen: the Hub switched off, or no token."""
    if hub_offline():
        raise HubError(f"{flag}: HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it to publish")
    from huggingface_hub import get_token

    if not get_token():
        raise HubError(f"{flag}: no Hugging Face token; run 'hf auth login' or set HF_TOKEN")
