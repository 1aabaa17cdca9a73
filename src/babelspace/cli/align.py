"""``babelspace align``: parse arguments, run :func:`babelspace.mining.align.align_files`, print a summary.

Registered by the top-level CLI through :func:`add_align_parser`; this module prints, the library logs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from babelspace.cli.config_flags import ConfigFlags, DefaultsFormatter, config_kwargs
from babelspace.cli.options import add_encoding_arguments, add_progress_argument
from babelspace.mining.align_dp import ALIGNMENT, AlignConfig

__all__ = ["add_align_parser", "format_summary", "run_align_command"]


def add_align_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "align",
        help="align the sentences of parallel documents (vecalign's embedding cost, or Gale-Church)",
        description=(
            "Align the sentences (one per line) of each pair of parallel documents by dynamic programming "
            "over 1-1, 1-2, 2-1, 1-0, 0-1 and wider blocks (up to --max-size sentences), the cost from the "
            "embeddings of concatenated sentences normalised by each side's neighbourhood (vecalign), and "
            "write every block with both sides as 'score<TAB>src_id<TAB>tgt_id<TAB>src<TAB>tgt' (the "
            "layout of 'babelspace mine', which 'babelspace train --data' reads; ids are PATH:LINES). "
            "See docs/alignment.md."
        ),
        formatter_class=DefaultsFormatter,
    )
    g = p.add_argument_group("documents")
    g.add_argument("--src", type=Path, default=None, help="source document, or a folder of them")
    g.add_argument(
        "--tgt", type=Path, default=None, help="target document, or a folder with files of the same names"
    )
    g.add_argument(
        "--pairs",
        type=Path,
        default=None,
        help="instead of --src/--tgt: a list of 'src_path<TAB>tgt_path' lines (relative to the list's folder)",
    )
    g.add_argument(
        "--allow-outside-paths",
        action="store_true",
        help="let --pairs entries leave the list's folder (absolute paths, '..'); without it they are "
        "refused, so a list from someone else cannot read other files of the machine",
    )
    g.add_argument("--out", type=Path, required=True, help="output TSV (summary JSON goes next to it)")
    g.add_argument(
        "--src-lang", default=None, help="language of the source documents (written to the summary)"
    )
    g.add_argument(
        "--tgt-lang",
        default=None,
        help="language of the target documents (written to the summary; 'babelspace train' needs it)",
    )
    g.add_argument("--skip-bad-lines", action="store_true", help="skip and count lines that are not UTF-8")

    g = p.add_argument_group(ALIGNMENT)  # the AlignConfig fields
    flags = ConfigFlags(AlignConfig)
    flags.add(g, "method")
    g.add_argument(
        "--model", default=None, help="'e5-small', 'minilm', a sentence-transformers folder or hub id"
    )
    flags.add_all(p, {ALIGNMENT: g})
    add_encoding_arguments(p.add_argument_group("encoding"))
    add_progress_argument(p)
    p.set_defaults(func=run_align_command)
    return p


def run_align_command(args: argparse.Namespace) -> int:
    from babelspace.api import ModelNeeded, align
    from babelspace.mining.align_dp import AlignError

    try:
        result = align(
            args.src,
            args.tgt,
            model=args.model,
            out=args.out,
            pairs=args.pairs,
            src_lang=args.src_lang,
            tgt_lang=args.tgt_lang,
            skip_bad_lines=args.skip_bad_lines,
            allow_outside_paths=args.allow_outside_paths,
            show_progress=not args.no_progress,
            **config_kwargs(AlignConfig, args),
            batch_size=args.batch_size,
            max_seq_length=args.max_seq_length,
            backend=args.backend,
            quantize=args.quantize,
            device=args.device,
        )
    except ModelNeeded:  # the API's words are a Python call's; the command names its flags
        raise AlignError("--method embeddings needs --model (or use --method gale-church)") from None
    print(format_summary(result.summary))
    return 0


def format_summary(summary: dict[str, Any]) -> str:
    from babelspace.mining.align import alignment_summary_path

    docs, sents, trunc = summary["documents"], summary["sentences"], summary["truncated"]
    skipped = ", ".join(f"{n} {reason}" for reason, n in docs["skipped"].items())
    blocks = ", ".join(f"{k} {v}" for k, v in summary["blocks"].items())
    lines = [
        f"documents: {docs['aligned']}/{docs['pairs']} pairs aligned"
        + (f" (skipped {skipped})" if skipped else ""),
        f"sentences: src {sents.get('src', 0)}, tgt {sents.get('tgt', 0)}"
        + "".join(
            f"; {sents[k]} {k.replace('_', ' ')}" for k in sorted(sents) if k.endswith("_lines") and sents[k]
        ),
        f"blocks: {blocks or 'none'}",
        f"pairs: {summary['pairs']} written ({summary['method']}"
        + (f", {summary['model']}" if summary["model"] else "")
        + f"); {summary['pairs_per_s']} pairs/s encoding and searching, "
        f"{summary['timings_s']['total_s']:.1f}s in all",
    ]
    if trunc["lines"] or trunc["merges"]:
        lines.append(
            f"truncated: {trunc['lines']} sentences and {trunc['merges']} concatenations longer than the "
            f"model's {trunc['window_tokens']}-token window were encoded from their first "
            f"{trunc['window_tokens']} tokens (their cost sees only that part)"
        )
    if summary["tgt_lang"] is None:
        lines.append("note: no --tgt-lang given; 'babelspace train --data' will ask for it")
    lines.append(f"wrote {summary['output']} and {alignment_summary_path(summary['output'])}")
    return "\n".join(lines)
