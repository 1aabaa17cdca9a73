"""``babelspace encode MODEL FILE --out VECTORS.npy``: one normalised float32 row per input line."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from babelspace.cli.argtypes import positive_int
from babelspace.cli.options import add_encoding_arguments

logger = logging.getLogger("babelspace")


def add_encode_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("encode", help="encode a file (one sentence per line) to a .npy of normalised float32")
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
    add_encoding_arguments(p)
    p.set_defaults(func=run_encode)


def run_encode(args: argparse.Namespace) -> int:
    import numpy as np

    from babelspace.data.readers import read_text_lines
    from babelspace.errors import BabelspaceError
    from babelspace.models.backends import load_backend_encoder, validate_backend
    from babelspace.models.encoder import encode
    from babelspace.writable import check_output

    validate_backend(args.backend, args.quantize)
    if args.file.is_dir():  # the input's fault, said before the output check would blame --out
        raise BabelspaceError(f"FILE {args.file} is a folder; give a text file with one sentence per line")
    check_output(args.out, "--out", inputs=[("FILE", args.file)], models=[("MODEL", args.model)])
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
        vecs = encode(model, texts, batch_size=args.batch_size, show_progress=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as fh:  # exactly --out (np.save on a path would append .npy)
        np.save(fh, vecs)
    print(f"wrote {vecs.shape[0]} x {vecs.shape[1]} float32 vectors to {args.out} ({blank} blank lines)")
    return 0


def _encode_in_workers(args: argparse.Namespace, texts: list[str]):
    from babelspace.cli.options import encoding_options
    from babelspace.mining.encode import encode_in_workers

    opts = encoding_options(args, executor="processes", workers=args.workers)
    return encode_in_workers(texts, args.model, opts)
