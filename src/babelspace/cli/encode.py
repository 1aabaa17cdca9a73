"""``babelspace encode MODEL FILE --out VECTORS.npy``: one float32 row per input line, the vectors
``SentenceTransformer(MODEL).encode`` returns (``--normalize``: scaled to unit length)."""

from __future__ import annotations

import argparse
from pathlib import Path

from babelspace.cli.argtypes import positive_int
from babelspace.cli.config_flags import DefaultsFormatter
from babelspace.cli.options import add_encoding_arguments


def add_encode_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "encode",
        help="encode a file (one sentence per line) to a .npy of float32 vectors",
        description="Encode FILE (one sentence per line) with MODEL into a .npy of float32 rows, in input "
        "order: the vectors SentenceTransformer(MODEL).encode returns, or with --normalize scaled to unit "
        "length (then a dot product is the cosine).",
        formatter_class=DefaultsFormatter,
    )
    p.add_argument("model", help="'minilm', 'e5-small', a sentence-transformers folder or a hub id")
    p.add_argument("file", type=Path, help="UTF-8 text, one sentence per line")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output file, written as .npy (exactly this path, whatever its suffix)",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="encoding processes, each on its own GPU when there are several (1: in this process)",
    )
    p.add_argument(
        "--normalize",
        action="store_true",
        help="scale every vector to unit length (default: the model's own output, as "
        "SentenceTransformer(MODEL).encode gives it; a model ending in Normalize is unit-length either way)",
    )
    add_encoding_arguments(p)
    p.set_defaults(func=run_encode)


def run_encode(args: argparse.Namespace) -> int:
    from babelspace.api import encode

    result = encode(
        args.model,
        args.file,
        args.out,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        backend=args.backend,
        quantize=args.quantize,
        device=args.device,
        workers=args.workers,
        normalize=args.normalize,
    )
    print(result)
    return 0
