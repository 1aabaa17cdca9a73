"""``babelspace eval MODEL``: parse arguments, run :mod:`babelspace.evaluation.runner`, print the tables of
:func:`babelspace.evaluation.report.format_report`.

Registered by the top-level CLI through :func:`add_eval_parser`; this module prints, the runner logs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from babelspace.cli.argtypes import positive_int
from babelspace.cli.options import (
    add_encoding_arguments,
    add_margin_argument,
    add_progress_argument,
)
from babelspace.errors import BabelspaceError
from babelspace.evaluation.config import DIRECTIONS, QUICK_MAX_SENTENCES, EvalConfig
from babelspace.evaluation.report import format_report
from babelspace.evaluation.tasks.names import ALL_TASKS, parse_tasks

__all__ = ["add_eval_parser", "run_eval_command"]


def _task_list(value: str) -> list[str]:
    try:
        return parse_tasks(value)
    except BabelspaceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_eval_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "eval",
        help="evaluate a sentence encoder: xsim, xsim++, Tatoeba, BUCC, STS, MSE to teacher, language bias",
        description=(
            "Evaluate MODEL (a sentence-transformers folder, a hub id, 'minilm' or 'e5-small'). With no "
            "--data it runs on the offline Bible test books for every language (21 non-English languages, "
            f"one shared English pool): by default a quick run ({QUICK_MAX_SENTENCES} verses per language, BUCC "
            "among the evaluated verses), --full for the full-size protocol. See docs/evaluation.md."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("model", help="'minilm', 'e5-small', a sentence-transformers folder or a hub id")
    p.add_argument(
        "--task",
        type=_task_list,
        default="all",  # a string default goes through type=, so args.task is always a list
        metavar="TASKS",
        help=f"comma-separated tasks from {','.join(ALL_TASKS)}, or 'all'",
    )
    g = p.add_argument_group("data")
    g.add_argument(
        "--data",
        nargs="+",
        default=None,
        metavar="PATH",
        help="evaluation pairs: 'bible', a TSV, JSON Lines, CSV or Parquet file, 'aligned:SRC_FILE+TGT_FILE' "
        "(two line-aligned files) or a Hugging Face dataset folder; several as a list or joined by commas "
        "(default: the Bible test books)",
    )
    g.add_argument("--langs", default=None, help="comma-separated language codes (default: every language)")
    g.add_argument("--src-lang", default=None, help="source language of 2-column TSV / aligned files")
    g.add_argument("--tgt-lang", default=None, help="target language of 2-column TSV / aligned files")
    g.add_argument(
        "--max-sentences",
        type=positive_int,
        default=None,
        help="seeded random subset of the evaluation pairs per language (the same verses for every language; "
        f"default: all, or {QUICK_MAX_SENTENCES} Bible verses without --full)",
    )
    g.add_argument(
        "--seed", type=int, default=0, help="seed of subsets, BUCC construction and xsim++ negatives"
    )
    g.add_argument(
        "--full",
        action="store_true",
        help="full-size protocol on the Bible: every test verse (the quick default takes "
        f"{QUICK_MAX_SENTENCES} per language) and BUCC gold hidden among --bucc-ratio times as many "
        "train-book verses (the quick default hides it among the other evaluated verses)",
    )
    x = p.add_argument_group("xsim / xsim++ / BUCC")
    add_margin_argument(x)
    x.add_argument("--k", type=positive_int, default=4, help="neighbourhood size of the margin")
    x.add_argument(
        "--direction", choices=list(DIRECTIONS), default="xx2en", help="xsim: xx->en only, or also en->xx"
    )
    x.add_argument(
        "--xsimpp-files",
        nargs=2,
        metavar=("AUGMENTED", "TYPES"),
        default=None,
        help="xsim++ with released files: the augmented English file and its error-type JSON "
        "(sources are matched by English text in the evaluation data)",
    )
    x.add_argument("--tatoeba-dir", default=None, help="LASER Tatoeba folder (tatoeba.xxx-eng.{xxx,eng})")
    x.add_argument("--bucc-dir", default=None, help="BUCC 2018 folder (xx-en.{training,test}.{xx,en,gold})")
    x.add_argument(
        "--bucc-ratio",
        type=float,
        default=4.0,
        help="built BUCC task: distractors per gold pair per side (ignored with --bucc-dir)",
    )
    s = p.add_argument_group("STS / MSE")
    s.add_argument("--sts", nargs="+", default=[], metavar="FILE", help="STS17-style or STSb files")
    s.add_argument("--teacher", default="minilm", help="teacher of the mse task")
    o = p.add_argument_group("output and speed")
    o.add_argument(
        "--out", type=Path, default=None, metavar="OUT.json", help="write every figure and its config as JSON"
    )
    o.add_argument(
        "--plots", type=Path, default=None, metavar="DIR", help="write per-task bar PNGs and a PCA"
    )
    add_encoding_arguments(o)
    add_progress_argument(o)
    p.set_defaults(func=run_eval_command)
    return p


def _config_from_args(args: argparse.Namespace) -> EvalConfig:

    langs = [v.strip() for v in args.langs.split(",") if v.strip()] if args.langs else None
    return EvalConfig(
        model=args.model,
        tasks=list(args.task),
        data=args.data,
        langs=langs,
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
        teacher=args.teacher,
        margin=args.margin,
        k=args.k,
        direction=args.direction,
        max_sentences=args.max_sentences,
        seed=args.seed,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        device=args.device,
        backend=args.backend,
        quantize=args.quantize,
        xsimpp_files=tuple(str(f) for f in args.xsimpp_files) if args.xsimpp_files else None,
        tatoeba_dir=args.tatoeba_dir,
        bucc_dir=args.bucc_dir,
        bucc_ratio=args.bucc_ratio,
        sts_files=[str(f) for f in args.sts],
        plots_dir=str(args.plots) if args.plots else None,
        progress=not args.no_progress,  # a bar on a terminal, log lines with ETA otherwise
        full=args.full,
    )


def _inputs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Every local file and folder the evaluation reads, with the flag that named it."""
    from babelspace.writable import spec_paths

    named = spec_paths("--data", args.data) + [("--sts", str(f)) for f in args.sts]
    named += [("--xsimpp-files", str(f)) for f in args.xsimpp_files or ()]
    return named + [("--tatoeba-dir", args.tatoeba_dir), ("--bucc-dir", args.bucc_dir)]


def run_eval_command(args: argparse.Namespace) -> int:
    from babelspace.evaluation.report import write_json
    from babelspace.evaluation.runner import run_eval
    from babelspace.writable import check_output

    cfg = _config_from_args(args)
    inputs = _inputs(args)
    models = [("MODEL", args.model), ("--teacher", args.teacher)]
    if args.out is not None:  # refused now, not after the whole evaluation
        check_output(args.out, "--out", inputs=inputs, models=models, report_beside_model=True)
    if args.plots is not None:
        check_output(args.plots, "--plots", inputs=inputs, models=models, folder=True)
    report = run_eval(cfg)
    print(format_report(report))
    if args.out is not None:
        write_json(args.out, report.to_dict())
        print(f"\nwrote {args.out}")
    for path in report.plots:
        print(f"wrote {path}")
    return 0
