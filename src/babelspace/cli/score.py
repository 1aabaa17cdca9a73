"""``babelspace score``: parse arguments, run :func:`babelspace.mining.score.score_bitext`, print a summary."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from babelspace.cli.argtypes import finite_float, open_fraction, positive_int
from babelspace.cli.config_flags import DefaultsFormatter, memory_size
from babelspace.cli.options import (
    add_encoding_arguments,
    add_margin_argument,
    add_progress_argument,
)
from babelspace.mining.corpus import DEFAULT_MAX_CHARS
from babelspace.mining.memory import parse_memory

__all__ = ["add_score_parser", "format_score_summary", "run_score_command"]


def _paths(value: str) -> list[Path]:
    return [Path(p) for p in value.split(",") if p]


def _threshold(value: str) -> float | str:
    return value if value == "auto" else finite_float(value)


def _ratio(value: str) -> float:
    x = finite_float(value)
    if x < 1:
        raise argparse.ArgumentTypeError(f"expected a ratio >= 1, got {value}")
    return x


def add_score_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "score",
        help="score and filter an existing bitext by margin (out of core), with cheap filters",
        description=(
            "Score every pair of BITEXT (a TSV, JSON Lines, CSV or Parquet file, 'babelspace mine' output, "
            "'aligned:SRC_FILE+TGT_FILE' or 'bible') by "
            "margin against the neighbourhoods of both sides (the bitext's own sentences, plus --background-src/"
            "--background-tgt), drop rows flagged by the filters switched on, cut at --threshold and write the "
            "kept rows as 'score<TAB>src_id<TAB>tgt_id<TAB>src<TAB>tgt<TAB>src_lang<TAB>tgt_lang' (what "
            "'babelspace train --data' reads, each row with its languages), every row's score and verdict to "
            "OUT's stem + '.scores.tsv' and a summary JSON. Exit status 1: --threshold auto kept nothing "
            "(the summary says why). See docs/mining.md."
        ),
        formatter_class=DefaultsFormatter,
    )
    p.add_argument(
        "bitext",
        help="TSV, JSONL/CSV/Parquet, mine output, 'aligned:SRC_FILE+TGT_FILE' (line-aligned) or 'bible'",
    )
    p.add_argument(
        "--model", required=True, help="'minilm', 'e5-small', a sentence-transformers folder or hub id"
    )
    p.add_argument(
        "--out", type=Path, required=True, help="kept rows (TSV); summary and scores go next to it"
    )
    p.add_argument("--src-lang", default=None, help="language of the source side (else from the file)")
    p.add_argument("--tgt-lang", default=None, help="language of the target side (else from the file)")
    p.add_argument(
        "--split",
        default=None,
        help="split of a folder or of 'bible' to score (default: as 'train --data' reads it: the only split, "
        "else train)",
    )
    g = p.add_argument_group("scoring")
    g.add_argument("--k", type=positive_int, default=4, help="neighbourhood size of the margin")
    add_margin_argument(g)
    g.add_argument(
        "--threshold",
        type=_threshold,
        default="auto",
        help="keep rows scoring >= T; 'auto': where the densities of related rows and of the same rows shuffled cross, "
        "or the loosest threshold reaching --target-precision (docs/mining.md)",
    )
    g.add_argument(
        "--target-precision",
        type=open_fraction,
        default=None,
        help="with --threshold auto: the loosest threshold whose estimated precision reaches this (default: the "
        "densities' crossing)",
    )
    g.add_argument(
        "--background-src",
        type=_paths,
        default=[],
        help="monolingual files (comma-separated) added to the sources' neighbourhood",
    )
    g.add_argument(
        "--background-tgt",
        type=_paths,
        default=[],
        help="monolingual files (comma-separated) added to the targets' neighbourhood",
    )
    g.add_argument("--max-memory", type=memory_size, default=parse_memory("4GB"), help="search memory budget")
    g = p.add_argument_group("filters (duplicates and identical on, each off by --no-filter-NAME)")
    g.add_argument(
        "--filter-duplicates",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="drop rows repeating an earlier row (case, spacing and punctuation aside)",
    )
    g.add_argument(
        "--filter-identical",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="drop rows whose sides are (nearly) the same",
    )
    g.add_argument(
        "--filter-length-ratio",
        type=_ratio,
        default=None,
        metavar="R",
        help="drop rows whose longer side has more than R times the characters of the shorter",
    )
    g.add_argument(
        "--filter-script",
        action="store_true",
        help="drop rows with a side mostly outside its language's script",
    )
    g.add_argument(
        "--filter-lang",
        action="store_true",
        help="drop rows the offline language identifier (py3langid; pip install 'babelspace[lid]') places in "
        "another language",
    )
    g = p.add_argument_group("encoding and input")
    g.add_argument("--workdir", type=Path, default=None, help="shard folder (default: OUT's stem + '.work')")
    g.add_argument("--shard-size", type=positive_int, default=10000, help="sentences per shard")
    g.add_argument("--fp16", action="store_true", help="store shards as float16 (half the disk)")
    add_encoding_arguments(g)
    g.add_argument(
        "--max-chars", type=positive_int, default=DEFAULT_MAX_CHARS, help="drop longer rows (counted)"
    )
    g.add_argument("--skip-bad-lines", action="store_true", help="skip and count unreadable lines")
    add_progress_argument(g)
    p.set_defaults(func=run_score_command)
    return p


def run_score_command(args: argparse.Namespace) -> int:
    from babelspace.api import score
    from babelspace.mining.score import NOTHING_KEPT

    result = score(
        args.bitext,
        model=args.model,
        out=args.out,
        workdir=args.workdir,
        max_chars=args.max_chars,
        skip_bad_lines=args.skip_bad_lines,
        show_progress=not args.no_progress,
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
        background_src=args.background_src,
        background_tgt=args.background_tgt,
        split=args.split,
        k=args.k,
        margin=args.margin,
        threshold=args.threshold,
        target_precision=args.target_precision,
        max_memory=args.max_memory,
        filter_duplicates=args.filter_duplicates,
        filter_identical=args.filter_identical,
        filter_length_ratio=args.filter_length_ratio,
        filter_script=args.filter_script,
        filter_lang=args.filter_lang,
        **_encoding(args),
    )
    print(format_score_summary(result.summary))
    return 0 if result.reached else NOTHING_KEPT


def _encoding(args: argparse.Namespace) -> dict[str, Any]:
    names = ("batch_size", "max_seq_length", "backend", "quantize", "device", "shard_size", "fp16")
    return {n: getattr(args, n) for n in names if hasattr(args, n)}


def format_score_summary(summary: dict[str, Any]) -> str:
    f = summary["filters"]
    dropped = (
        ", ".join(f"{f['dropped'][n]} {n} (flagged {f['flagged'][n]})" for n in f["enabled"]) or "none on"
    )
    bg = summary["background"]
    split = f" ({summary['split']} split)" if summary.get("split") else ""
    pairs = ", ".join(f"{lp} {n}" for lp, n in summary["lang_pairs"].items())
    own = bg["dropped_as_in_bitext"]
    cut = f"score >= {summary['threshold']:g}" if summary["threshold"] is not None else "no threshold"
    lines = [
        summary["read"] + split,
        f"language pairs: {pairs}",
        f"neighbourhoods: k={summary['k']}, {summary['margin']} margin; background {bg['src']} source and "
        f"{bg['tgt']} target sentences ({own['src']} and {own['tgt']} left out: in the bitext)",
        f"filters: {dropped}; {summary['too_long']} too long",
        f"kept {summary['kept']} of {summary['rows']} rows with {cut} "
        f"({summary['below_threshold']} below); threshold {summary['threshold_source']}",
    ]
    if summary.get("separation") not in (None, "separates"):
        lines.append(f"warning: {summary['separation']}")
    lines.append(f"wrote {summary['output']}, {summary['scores']} and the summary")
    return "\n".join(lines)
