"""``babelspace train | eval | mine | encode | export | decode | push | resources`` — thin: parse, call the library, print."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from babelspace.argtypes import positive_int
from babelspace.errors import BabelspaceError

logger = logging.getLogger("babelspace")


# ----------------------------------------------------------------------------- encode
def add_encode_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("encode", help="encode a file (one sentence per line) to a .npy of normalised float32")
    p.add_argument("model", help="'minilm', 'e5-small', a sentence-transformers folder or a hub id")
    p.add_argument("file", type=Path, help="UTF-8 text, one sentence per line")
    p.add_argument("--out", type=Path, required=True, help="output .npy")
    p.add_argument("--batch-size", type=positive_int, default=64, help="texts per encoding batch")
    p.add_argument(
        "--max-seq-length",
        type=positive_int,
        default=None,
        help="truncate texts to this many tokens (default: the model's)",
    )
    from babelspace.device import add_device_argument
    from babelspace.export_cli import add_backend_arguments

    add_backend_arguments(p)
    add_device_argument(p)
    p.set_defaults(func=run_encode)


def run_encode(args: argparse.Namespace) -> int:
    import numpy as np

    from babelspace.backends import load_backend_encoder, validate_backend
    from babelspace.data.readers import check_output_file, read_text_lines
    from babelspace.encoder import encode

    validate_backend(args.backend, args.quantize)
    check_output_file(args.out, "--out")
    texts, blank = read_text_lines(args.file)
    if not texts:
        logger.warning("%s has no lines: writing an empty (0 x d) array", args.file)
    elif blank:
        logger.warning(
            "%s: %d blank line(s) encoded as the empty string (one row per line)", args.file, blank
        )
    model = load_backend_encoder(
        args.model, args.backend, args.quantize, device=args.device, max_seq_length=args.max_seq_length
    )
    vecs = encode(model, texts, batch_size=args.batch_size, show_progress=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, vecs)
    print(f"wrote {vecs.shape[0]} x {vecs.shape[1]} float32 vectors to {args.out} ({blank} blank lines)")
    return 0


# ----------------------------------------------------------------------------- resources
def add_resources_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resources", help="list the offline models and corpora, with status, path and licence")
    p.add_argument("--materialise", action="store_true", help="build cached models now (e5-small)")
    p.set_defaults(func=run_resources)


def run_resources(args: argparse.Namespace) -> int:
    from babelspace.evaluation.report import format_table
    from babelspace.resources import RESOURCES, list_resources

    if args.materialise:
        for r in RESOURCES.values():
            if r.kind == "model":  # corpora are read in place; an optional one may be missing
                r.locate(True)
    rows = list_resources()
    print(format_table(rows, columns=["name", "kind", "status", "licence", "path"]))
    for r in rows:
        print(f"  {r['name']}: {r['description']} [{r['source']}]")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="babelspace", description=__doc__)
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    from babelspace.train_cli import add_train_parser

    add_train_parser(sub)
    add_encode_parser(sub)
    add_resources_parser(sub)
    from babelspace.export_cli import add_export_parser

    add_export_parser(sub)
    from babelspace.evaluation.cli import add_eval_parser
    from babelspace.mining.cli import add_mine_parser

    add_eval_parser(sub)
    add_mine_parser(sub)
    from babelspace.decode_cli import add_decode_parser

    add_decode_parser(sub)
    from babelspace.push_cli import add_push_parser

    add_push_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    if args.command in {"train"} and args.verbose == 0:
        level = logging.INFO
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    # progress lines (babelspace.progress: written only when stderr is not a terminal) in every command
    logging.getLogger("babelspace.progress").setLevel(min(level, logging.INFO))
    for noisy in ("sentence_transformers", "transformers", "httpx", "urllib3", "datasets", "faiss"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    from babelspace.logging_setup import quiet_third_party

    quiet_third_party()
    try:
        return int(args.func(args) or 0)
    except BabelspaceError as exc:
        print(f"babelspace: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("babelspace: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
