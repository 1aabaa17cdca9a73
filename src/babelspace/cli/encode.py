"""``babelspace encode MODEL FILE --out VECTORS.npy``: one float32 row per input line, the vectors
``SentenceTransformer(MODEL).encode`` returns (``--normalize``: scaled to unit length)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from babelspace.cli.argtypes import positive_int
from babelspace.cli.options import add_encoding_arguments

logger = logging.getLogger("babelspace")


def add_encode_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "encode",
        help="encode a file (one sentence per line) to a .npy of float32 vectors",
        description="Encode FILE (one sentence per line) with MODEL into a .npy of float32 rows, in input "
        "order: the vectors SentenceTransformer(MODEL).encode returns, or with --normalize scaled to unit "
        "length (then a dot product is the cosine).",
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
    import numpy as np

    from babelspace.data.readers import check_output_file, read_text_lines
    from babelspace.errors import BabelspaceError
    from babelspace.models.backends import load_backend_encoder, validate_backend
    from babelspace.models.encoder import encode
    from babelspace.writable import check_output_apart

    validate_backend(args.backend, args.quantize)
    if args.workers > 1 and args.backend != "torch" and not args.normalize:
        raise BabelspaceError(
            f"--workers {args.workers} with --backend {args.backend} writes unit vectors only: add --normalize"
        )
    check_output_apart(args.out, "--out", inputs=[("FILE", args.file)], models=[("MODEL", args.model)])
    check_output_file(args.out, "--out")
    texts, blank = read_text_lines(args.file)
    if not texts:
        logger.warning("%s has no lines: writing an empty (0 x d) array", args.file)
    elif blank:
        logger.warning(
            "%s: %d blank line(s) encoded as the empty string (one row per line)", args.file, blank
        )
    if args.workers > 1 and texts:
        vecs = _encode_in_workers(args, texts)
    else:
        model = load_backend_encoder(
            args.model, args.backend, args.quantize, device=args.device, max_seq_length=args.max_seq_length
        )
        vecs = encode(model, texts, batch_size=args.batch_size, show_progress=True, normalize=args.normalize)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as fh:  # exactly --out (np.save on a path would append .npy)
        np.save(fh, vecs)
    print(f"wrote {vecs.shape[0]} x {vecs.shape[1]} float32 vectors to {args.out} ({blank} blank lines)")
    return 0


def _encode_in_workers(args: argparse.Namespace, texts: list[str]):
    from babelspace.cli.options import encoding_options
    from babelspace.mining.encode import encode_in_workers

    opts = encoding_options(args, executor="processes", workers=args.workers)
    return encode_in_workers(texts, args.model, opts, normalize=args.normalize)
