"""``babelspace mine``: parse arguments, run :func:`babelspace.mining.pipeline.mine_files`, print a summary.

Registered by the top-level CLI through :func:`add_mine_parser`; this module prints, the library logs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from babelspace.cli.argtypes import finite_float, open_fraction, positive_int
from babelspace.cli.options import (
    add_encoding_arguments,
    add_margin_argument,
    add_progress_argument,
    encoding_options,
)
from babelspace.mining.core import DEFAULT_THRESHOLDS, MiningConfig
from babelspace.mining.corpus import DEFAULT_MAX_CHARS
from babelspace.mining.memory import format_bytes, parse_memory
from babelspace.mining.pipeline import summary_path
from babelspace.mining.search import INDEX_KINDS
from babelspace.retrieval.knn import RETRIEVALS

__all__ = ["add_mine_parser", "add_threshold_arguments", "format_summary", "memory_size", "run_mine_command"]


def memory_size(value: str) -> int:
    try:
        return parse_memory(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _threshold(value: str) -> float | str:
    if value == "auto":
        return value
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', not {value!r}") from None
    if number != number:
        raise argparse.ArgumentTypeError("expected a number or 'auto', not nan")
    return number


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except for flags whose help says the default itself (a ``None`` that means
    "detected" would print as ``(default: None)``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None and action.help and "default:" in action.help:
            return action.help
        return super()._get_help_string(action)


def add_threshold_arguments(g: argparse._ArgumentGroup) -> None:
    """``--threshold`` and ``--target-precision`` (mine, score)."""
    g.add_argument(
        "--threshold",
        type=_threshold,
        default="auto",
        help="keep pairs scoring >= T; 'auto': the lowest threshold whose estimated precision on this run "
        "reaches --target-precision (docs/mining.md says how it is estimated and how far to trust it). "
        f"LASER's fixed value is {DEFAULT_THRESHOLDS['ratio']} (ratio margin)",
    )
    g.add_argument(
        "--target-precision",
        type=open_fraction,
        default=0.9,
        help="precision --threshold auto aims at (between 0 and 1)",
    )


def add_mine_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "mine",
        help="mine parallel sentences from two monolingual files by margin kNN (out of core)",
        description=(
            "Encode SRC and TGT (one sentence per line, or id<TAB>sentence) into shards under --workdir, "
            "search the k nearest neighbours both ways shard by shard within --max-memory, score pairs by "
            "margin, keep a one-to-one set above --threshold and write 'score<TAB>src<TAB>tgt' sorted by "
            "score (with ids: 'score<TAB>src_id<TAB>tgt_id<TAB>src<TAB>tgt'). Rerunning the same command "
            "resumes: finished shards are reused. See docs/mining.md."
        ),
        formatter_class=_HelpFormatter,
    )
    p.add_argument("--src", type=Path, required=True, help="source sentences")
    p.add_argument("--tgt", type=Path, required=True, help="target sentences")
    p.add_argument(
        "--model", required=True, help="'minilm', 'e5-small', a sentence-transformers folder or hub id"
    )
    p.add_argument("--out", type=Path, required=True, help="output TSV (summary JSON goes next to it)")

    g = p.add_argument_group("scoring")
    g.add_argument("--k", type=positive_int, default=4, help="neighbourhood size of the margin")
    add_margin_argument(g)
    g.add_argument(
        "--retrieval",
        choices=list(RETRIEVALS),
        default="max",
        help="candidates: forward (each source's best target), backward, intersect (mutual best) or "
        "max (the union; BUCC's pool)",
    )
    add_threshold_arguments(g)
    g.add_argument(
        "--src-lang",
        default=None,
        help="language of --src (written to the summary for 'babelspace train'; with --tgt-lang and "
        "--check-recall, --threshold auto also estimates recall on known Bible pairs)",
    )
    g.add_argument("--tgt-lang", default=None, help="language of --tgt (see --src-lang)")
    g.add_argument(
        "--check-recall",
        action="store_true",
        help=MiningConfig.__dataclass_fields__["check_recall"].metadata["help"],
    )

    g = p.add_argument_group("search")
    g.add_argument("--index", choices=list(INDEX_KINDS), default="flat", help="flat = exact")
    g.add_argument("--nprobe", type=positive_int, default=16, help="IVF lists visited per query")
    g.add_argument("--nlist", type=positive_int, default=None, help="IVF lists (default ~4*sqrt(n))")
    g.add_argument("--pq-m", type=positive_int, default=None, help="ivfpq bytes per vector (default dim/8)")
    g.add_argument(
        "--max-memory",
        type=memory_size,
        default=parse_memory("4GB"),
        help="search memory budget, e.g. 4GB, 512MB",
    )

    g = p.add_argument_group("encoding and storage")
    g.add_argument("--workdir", type=Path, default=None, help="shard folder (default: OUT's stem + '.work')")
    g.add_argument("--shard-size", type=positive_int, default=10000, help="sentences per shard")
    g.add_argument("--fp16", action="store_true", help="store shards as float16 (half the disk)")
    add_encoding_arguments(g)
    g.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="encoding processes / Ray actors (1: in this process)",
    )
    g.add_argument(
        "--ray", action="store_true", help="encode on Ray (ray.data actor pool; needs babelspace[ray])"
    )
    g.add_argument("--ray-address", default=None, help="Ray cluster address (default: RAY_ADDRESS or local)")
    g.add_argument(
        "--ray-gpus-per-worker",
        type=finite_float,
        default=0.0,
        help="GPUs Ray reserves for each actor (0: none; 0.5: two actors share a GPU)",
    )

    g = p.add_argument_group("input")
    ids = g.add_mutually_exclusive_group()
    detected = (
        "(default: neither: ids are detected when every non-empty line has exactly one tab, and such a file "
        "is refused when its first column looks like sentences)"
    )
    ids.add_argument(
        "--ids", dest="ids", action="store_true", default=None, help=f"lines are id<TAB>sentence {detected}"
    )
    ids.add_argument(
        "--no-ids",
        dest="ids",
        action="store_false",
        default=None,
        help=f"lines are sentences (tabs are spaces) {detected}",
    )
    g.add_argument("--max-chars", type=positive_int, default=DEFAULT_MAX_CHARS, help="skip longer lines")
    g.add_argument("--skip-bad-lines", action="store_true", help="skip and count non-UTF-8 / malformed lines")
    add_progress_argument(g)
    p.set_defaults(func=run_mine_command)
    return p


def run_mine_command(args: argparse.Namespace) -> int:
    from babelspace.mining.pipeline import mine_files
    from babelspace.models.backends import validate_backend

    validate_backend(args.backend, args.quantize)
    _check_outputs_apart(args)

    config = MiningConfig(
        k=args.k,
        margin=args.margin,
        retrieval=args.retrieval,
        threshold=args.threshold,
        target_precision=args.target_precision,
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
        check_recall=args.check_recall,
        index=args.index,
        nprobe=args.nprobe,
        nlist=args.nlist,
        pq_m=args.pq_m,
        max_memory=args.max_memory,
        show_progress=not args.no_progress,
    )
    executor = "ray" if args.ray else "processes" if args.workers > 1 else "local"
    enc = encoding_options(
        args,
        shard_size=args.shard_size,
        fp16=args.fp16,
        executor=executor,
        workers=args.workers,
        ray_address=args.ray_address,
        ray_gpus_per_worker=args.ray_gpus_per_worker,
    )
    try:
        summary = mine_files(
            args.src,
            args.tgt,
            args.out,
            args.model,
            config,
            enc,
            workdir=args.workdir,
            ids=args.ids,
            max_chars=args.max_chars,
            skip_bad_lines=args.skip_bad_lines,
        )
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: say what a rerun reuses
        exc.add_note(f"{args.out} not written; the same command again reuses the shards encoded so far")
        raise
    print(format_summary(summary))
    return 0


def _check_outputs_apart(args: argparse.Namespace) -> None:
    """--out, its summary and --workdir never land on --src, --tgt or the --model folder."""
    from babelspace.writable import check_output_apart

    inputs, models = [("--src", args.src), ("--tgt", args.tgt)], [("--model", args.model)]
    check_output_apart(args.out, "--out", inputs=inputs, models=models)
    check_output_apart(summary_path(args.out), "--out's summary", inputs=inputs, models=models)
    if args.workdir is not None:
        check_output_apart(args.workdir, "--workdir", inputs=inputs, models=models, folder=True)


def _side(name: str, s: dict[str, Any]) -> str:
    skipped = [
        f"{s[k]} {k.replace('_', ' ')}"
        for k in ("empty", "too_long", "duplicates", "invalid_utf8", "bad_format")
        if s[k]
    ]
    ids = (
        " (ids detected: the first column is read as ids; --no-ids reads whole lines)"
        if s["ids_detected"]
        else ""
    )
    return (
        f"{name}: {s['kept']}/{s['lines']} lines kept"
        + (f" (skipped {', '.join(skipped)})" if skipped else "")
        + ids
    )


def format_summary(summary: dict[str, Any]) -> str:
    t = summary["timings_s"]
    enc = summary["encoding"]
    fwd = summary["plans"]["forward"]
    lines = [
        _side("src", summary["src"]),
        _side("tgt", summary["tgt"]),
        f"model: {summary['model']} ({summary['dim']}-d, shards {summary['dtype']} x {summary['shard_size']} in "
        f"{summary['workdir']}; encoded {enc['src']['encoded'] + enc['tgt']['encoded']}, reused "
        f"{enc['src']['reused'] + enc['tgt']['reused']})",
        f"search: {summary['index']} index, k={summary['k']}"
        + (
            f" (--k {summary['k_requested']} clipped to the corpus)"
            if summary["k"] != summary["k_requested"]
            else ""
        )
        + f", {summary['margin']} margin, "
        f"{summary['retrieval']} retrieval; blocks of {fwd['db_rows']} x {fwd['query_rows']} rows within "
        f"{format_bytes(summary['max_memory_bytes'])}",
        f"pairs: {summary['pairs']} with score >= {summary['threshold']:g} "
        f"(of {summary['one_to_one']} one-to-one, {summary['candidates']} candidates); threshold "
        f"{summary['threshold_source']}",
        "time: "
        + ", ".join(f"{k[:-2]} {v:.1f}s" for k, v in t.items())
        + f"; peak memory {format_bytes(summary['peak_rss_bytes'])}",
        f"wrote {summary['output']} and {summary_path(summary['output'])}",
    ]
    return "\n".join(lines)
