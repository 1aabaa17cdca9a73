"""The flags that several subcommands share, defined once so that they have one spelling and one help
text everywhere: ``--device``, ``--backend``/``--quantize``, ``--out`` and ``--no-progress``.
"""

from __future__ import annotations

import argparse
import logging

from babelspace.cli.argtypes import positive_int
from babelspace.models.backends import BACKENDS, QUANTIZATIONS
from babelspace.retrieval.knn import Margin

logger = logging.getLogger("babelspace")

DEVICE_HELP = (
    "torch device: auto (cuda when available, else mps, else cpu; cuda:$LOCAL_RANK under torchrun), "
    "cpu, cuda, cuda:N or mps"
)

Parser = argparse.ArgumentParser | argparse._ArgumentGroup


def add_device_argument(parser: Parser) -> None:
    """``--device`` for a command that encodes (eval, encode, mine)."""
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)


def add_backend_arguments(parser: Parser) -> None:
    """``--backend`` and ``--quantize`` (validated together by
    :func:`babelspace.models.backends.validate_backend`)."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="torch",
        help="inference backend: torch, onnx (ONNX Runtime) or openvino; exported once per "
        "model into the cache (docs/performance.md, 'Encoding backends')",
    )
    parser.add_argument(
        "--quantize",
        choices=QUANTIZATIONS,
        default="none",
        help="int8: ONNX Runtime dynamic / OpenVINO static int8 quantisation (onnx or openvino only)",
    )


def add_batching_arguments(parser: Parser) -> None:
    """``--batch-size`` and ``--max-seq-length`` (every command that encodes)."""
    parser.add_argument("--batch-size", type=positive_int, default=64, help="texts per encoding batch")
    parser.add_argument(
        "--max-seq-length",
        type=positive_int,
        default=None,
        help="tokens per text (longer ones are truncated; default: the model's own limit)",
    )


def add_encoding_arguments(parser: Parser) -> None:
    """How a command encodes text: ``--batch-size``, ``--max-seq-length``, ``--backend``/``--quantize``
    and ``--device`` (eval, encode, mine)."""
    add_batching_arguments(parser)
    add_backend_arguments(parser)
    add_device_argument(parser)


def add_margin_argument(parser: Parser) -> None:
    """``--margin``: how a neighbour's cosine is scored against its neighbourhoods (Artetxe & Schwenk 2019)."""
    parser.add_argument(
        "--margin",
        choices=[m.value for m in Margin],
        default=Margin.RATIO.value,
        help="ratio: cos / mean of the two k-neighbourhoods (LASER); distance: cos minus that mean; "
        "absolute: plain cosine",
    )


def add_progress_argument(parser: Parser) -> None:
    """``--no-progress`` (progress bars and progress log lines off)."""
    parser.add_argument(
        "--no-progress", dest="no_progress", action="store_true", help="no progress bars or progress lines"
    )
