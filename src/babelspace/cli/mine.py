"""``babelspace mine``: parse arguments, run :func:`babelspace.mining.pipeline.mine_files`, print a summary.

Registered by the top-level CLI through :func:`add_mine_parser`; this module prints, the library logs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from babelspace.cli.argtypes import finite_float, positive_int
from babelspace.cli.config_flags import ConfigFlags, DefaultsFormatter, config_kwargs
from babelspace.cli.options import (
    add_encoding_arguments,
    add_margin_argument,
    add_progress_argument,
)
from babelspace.mining.core import SCORING, MiningConfig
from babelspace.mining.corpus import DEFAULT_MAX_CHARS
from babelspace.mining.memory import format_bytes
from babelspace.mining.pipeline import summary_path

__all__ = ["add_mine_parser", "format_summary", "run_mine_command"]


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
        formatter_class=DefaultsFormatter,
    )
    p.add_argument("--src", type=Path, required=True, help="source sentences")
    p.add_argument("--tgt", type=Path, required=True, help="target sentences")
    p.add_argument(
        "--model", required=True, help="'minilm', 'e5-small', a sentence-transformers folder or hub id"
    )
    p.add_argument("--out", type=Path, required=True, help="output TSV (summary JSON goes next to it)")

    g = p.add_argument_group(SCORING)  # the MiningConfig fields, each in its group
    flags = ConfigFlags(MiningConfig)
    flags.add(g, "k")
    add_margin_argument(g)
    flags.add_all(p, {SCORING: g})

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
    from babelspace.api import mine

    try:
        result = mine(
            args.src,
            args.tgt,
            model=args.model,
            out=args.out,
            workdir=args.workdir,
            ids=args.ids,
            max_chars=args.max_chars,
            skip_bad_lines=args.skip_bad_lines,
            show_progress=not args.no_progress,
            margin=args.margin,
            **config_kwargs(MiningConfig, args),
            batch_size=args.batch_size,
            max_seq_length=args.max_seq_length,
            backend=args.backend,
            quantize=args.quantize,
            device=args.device,
            shard_size=args.shard_size,
            fp16=args.fp16,
            workers=args.workers,
            ray=args.ray,
            ray_address=args.ray_address,
            ray_gpus_per_worker=args.ray_gpus_per_worker,
        )
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: say what a rerun reuses
        exc.add_note(f"{args.out} not written; the same command again reuses the shards encoded so far")
        raise
    print(format_summary(result.summary))
    return 0


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
