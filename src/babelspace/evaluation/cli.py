"""``babelspace eval MODEL``: parse arguments, run :mod:`babelspace.evaluation.runner`, print the tables of
:func:`babelspace.evaluation.report.format_report`.

Registered by the top-level CLI through :func:`add_eval_parser`; this module prints, the runner logs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from babelspace.argtypes import positive_int
from babelspace.device import DEVICE_HELP
from babelspace.errors import BabelspaceError
from babelspace.evaluation.config import DIRECTIONS, QUICK_MAX_SENTENCES, EvalConfig
from babelspace.evaluation.knn import Margin
from babelspace.evaluation.report import format_report
from babelspace.evaluation.tasks.registry import ALL_TASKS, parse_tasks

__all__ = ["add_eval_parser", "format_report", "run_eval_command"]


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
        help="evaluation pairs: 'bible', a TSV file, 'SRC_FILE,TGT_FILE' or a Hugging Face dataset folder "
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
    x.add_argument(
        "--margin",
        choices=[m.value for m in Margin],
        default=Margin.RATIO.value,
        help="margin of the candidate scores: ratio cos/mean-neighbourhood (LASER), distance cos-mean, absolute cos",
    )
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
    o.add_argument("--json", type=Path, default=None, metavar="OUT", help="write every figure and its config")
    o.add_argument(
        "--plots", type=Path, default=None, metavar="DIR", help="write per-task bar PNGs and a PCA"
    )
    o.add_argument("--batch-size", type=positive_int, default=64, help="texts per encoding batch")
    o.add_argument(
        "--max-seq-length",
        type=positive_int,
        default=None,
        help="truncate texts to this many tokens (default: the model's)",
    )
    o.add_argument("--device", default="auto", help=DEVICE_HELP)
    from babelspace.export_cli import add_backend_arguments

    add_backend_arguments(o)
    o.add_argument(
        "--no-progress", action="store_true", help="no progress (bars on a terminal, log lines otherwise)"
    )
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


def run_eval_command(args: argparse.Namespace) -> int:
    from babelspace.evaluation.report import write_json
    from babelspace.evaluation.runner import run_eval

    cfg = _config_from_args(args)
    report = run_eval(cfg)
    print(format_report(report))
    if args.json is not None:
        write_json(args.json, report.to_dict())
        print(f"\nwrote {args.json}")
    for path in report.plots:
        print(f"wrote {path}")
    return 0
