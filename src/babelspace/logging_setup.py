"""Silence, in one place, the third-party messages that every model load prints and that are not news.

:func:`quiet_third_party` drops exactly these records (nothing else; every other warning and every
error still shows):

* transformers' "LOAD REPORT" table (transformers 5) or "Some weights ... were not initialized"
  (transformers 4) when *every* key it lists belongs to the BERT pooler or is the
  ``embeddings.position_ids`` buffer: multilingual-e5-small ships a pooler that sentence-transformers
  never runs (mean pooling reads the token vectors), and all-MiniLM-L6-v2's checkpoint carries the
  buffer that newer transformers rebuild, so the report says nothing about the embeddings. A report
  naming any other key still shows.
* sentence-transformers' "Default prompt name is set to ..." on every load: babelspace applies the
  model's default prompt on purpose (:func:`babelspace.models.encoder.default_prompt`).
* sentence-transformers' "The `tokenize` method is deprecated" (it still works; the replacement
  ``preprocess`` does not exist in the older releases babelspace supports).
* transformers 4's "incorrect regex pattern" tokenizer warning, a check written for Mistral
  tokenizers that fires on the XLM-R tokenizer of e5-small.
* optimum-intel's "Could not infer whether the model was already converted" when loading an
  OpenVINO file by explicit name (babelspace always names the file; nothing is inferred).
* sentence-transformers' "Saving the exported ... model is heavily recommended" during an export:
  :mod:`babelspace.models.backends` saves every export into the cache itself.

It also turns off transformers' per-load "Loading weights" progress bar. Idempotent.
"""

from __future__ import annotations

import logging
import re

__all__ = ["ThirdPartyNoiseFilter", "quiet_third_party"]

_LOGGERS = (
    "transformers.modeling_utils",
    "transformers.tokenization_utils_base",
    "transformers.tokenization_utils_fast",
    "transformers.tokenization_utils_tokenizers",
    "sentence_transformers.base.model",
    "sentence_transformers.base.modules.input_module",
    "sentence_transformers.SentenceTransformer",
    "sentence_transformers.sentence_transformer.model",
    "optimum.intel.openvino.modeling_base",
    "sentence_transformers.backend.utils",
)
_ALWAYS = (
    re.compile(r"^Default prompt name is set to "),
    re.compile(r"The `tokenize` method is deprecated"),
    re.compile(r"with an incorrect regex pattern: .*fix_mistral_regex"),
    re.compile(r"^Could not infer whether the model was already converted or not to the OpenVINO IR"),
    re.compile(r"^Saving the exported (ONNX|OpenVINO) model is heavily recommended"),
)
_KEY = re.compile(r"\b((?:[A-Za-z_][\w]*\.)+(?:weight|bias|position_ids))\b")
_LOAD_REPORTS = (
    "LOAD REPORT",
    "were not initialized from the model checkpoint",
    "were not used when initializing",
)


def _pooler_only(message: str) -> bool:
    """True when a weight-loading report names parameters and all of them belong to the pooler."""
    keys = set(_KEY.findall(message))
    return bool(keys) and all(_harmless(k) for k in keys)


def _harmless(key: str) -> bool:
    """The BERT pooler (never run by sentence-transformers) or the ``position_ids`` buffer that
    older checkpoints (all-MiniLM-L6-v2) still carry and newer transformers rebuild."""
    return key.split(".")[0] == "pooler" or ".pooler." in f".{key}" or key.endswith("embeddings.position_ids")


class ThirdPartyNoiseFilter(logging.Filter):
    """Drops the records listed in this module's docstring; lets every other record through."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is not ours to judge
            return True
        if any(p.search(message) for p in _ALWAYS):
            return False
        if any(marker in message for marker in _LOAD_REPORTS) and _pooler_only(message):
            return False
        return True


_FILTER = ThirdPartyNoiseFilter()


def quiet_third_party() -> None:
    """Install :class:`ThirdPartyNoiseFilter` on the loggers that emit the known noise (idempotent)."""
    for name in _LOGGERS:
        log = logging.getLogger(name)
        if _FILTER not in log.filters:
            log.addFilter(_FILTER)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # transformers is a dependency; a stripped install only keeps its bars
        pass
