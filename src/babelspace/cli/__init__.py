"""``babelspace train | eval | mteb | mine | score | align | encode | export | decode | push | resources``: one module per subcommand,
the shared flags in :mod:`babelspace.cli.options`; each parses, calls the library and prints."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from babelspace.errors import BabelspaceError

logger = logging.getLogger("babelspace")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("babelspace")
    except PackageNotFoundError:  # a source tree on sys.path, not installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="babelspace",
        description="One shared sentence-embedding space for every language: train a multilingual "
        "student, evaluate it, encode text, mine, score and align bitext. 'babelspace COMMAND --help' "
        "shows a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    # each subcommand module imports only what its parser needs; its run function loads the rest
    from babelspace.cli.align import add_align_parser
    from babelspace.cli.decode import add_decode_parser
    from babelspace.cli.encode import add_encode_parser
    from babelspace.cli.eval import add_eval_parser
    from babelspace.cli.export import add_export_parser
    from babelspace.cli.mine import add_mine_parser
    from babelspace.cli.mteb import add_mteb_parser
    from babelspace.cli.push import add_push_parser
    from babelspace.cli.resources import add_resources_parser
    from babelspace.cli.score import add_score_parser
    from babelspace.cli.train import add_train_parser

    for add in (
        add_train_parser,
        add_encode_parser,
        add_resources_parser,
        add_export_parser,
        add_eval_parser,
        add_mteb_parser,
        add_mine_parser,
        add_score_parser,
        add_align_parser,
        add_decode_parser,
        add_push_parser,
    ):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what the model card quotes
    if getattr(args, "hub_offline", False):  # `babelspace mteb`: set before any Hugging Face library loads
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
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
    from babelspace.cli.signals import exit_code, interrupt_line, sigterm_as_interrupt

    try:
        with sigterm_as_interrupt():  # SIGTERM cleans up and says so as Ctrl-C does
            return int(args.func(args) or 0)
    except BabelspaceError as exc:
        print(f"babelspace: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(interrupt_line(exc), file=sys.stderr)
        return exit_code(exc)


if __name__ == "__main__":
    sys.exit(main())
