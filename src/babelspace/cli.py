"""``babelspace train | eval | mine | encode | resources`` — thin: parse, call the library, print."""

from __future__ import annotations

import argparse
import logging
import resource
import sys
import time
from pathlib import Path

from babelspace.errors import BabelspaceError

logger = logging.getLogger("babelspace")


def _langs(value: str | None) -> list[str] | None:
    if not value:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- train
def add_train_parser(sub: argparse._SubParsersAction) -> None:
    from babelspace.training.config import TrainConfig

    d = TrainConfig()
    p = sub.add_parser(
        "train",
        help="train a multilingual student (default: distil minilm into e5-small on the offline Bible)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--objective",
        default=d.objective,
        help="distill | mexma | contrastive, or a '+'-joined weighted composition such as mexma+distill",
    )
    p.add_argument(
        "--objective-weights", default=None, help="comma-separated weights for a composition, e.g. 1,0.5"
    )
    p.add_argument("--teacher", default=d.teacher, help="teacher: 'minilm', a local folder or a hub id")
    p.add_argument(
        "--student", default=d.student, help="student: 'e5-small', 'teacher' (copy), a folder or hub id"
    )
    p.add_argument(
        "--data",
        nargs="+",
        default=d.data,
        help="corpora: 'bible', a TSV file, 'SRC_FILE,TGT_FILE', or a Hugging Face dataset folder",
    )
    p.add_argument("--langs", default=None, help="comma-separated language codes to keep (default: all)")
    p.add_argument(
        "--src-lang", default=None, help="source language of 2-column TSV / aligned files (default en)"
    )
    p.add_argument("--tgt-lang", default=None, help="target language of 2-column TSV / aligned files")
    p.add_argument(
        "--max-pairs", type=int, default=d.max_pairs, help="cap training pairs (stratified sample)"
    )
    p.add_argument(
        "--skip-bad-lines", action="store_true", help="skip and count malformed lines instead of failing"
    )
    p.add_argument(
        "--dev-pairs", type=int, default=d.dev_pairs, help="dev pairs (held out from non-Bible data)"
    )
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="pairs per batch")
    p.add_argument(
        "--lr", type=float, default=None, help="peak learning rate (default 1e-4 for distill, 2e-5 otherwise)"
    )
    p.add_argument("--warmup", type=int, default=d.warmup, help="linear warm-up steps")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--epochs", type=float, default=None)
    g.add_argument("--max-steps", type=int, default=None, help=f"training steps (default {d.max_steps})")
    p.add_argument("--max-seq-length", type=int, default=d.max_seq_length)
    p.add_argument("--eval-every", type=int, default=d.eval_every, help="dev evaluation every N steps")
    p.add_argument("--output", type=Path, default=d.output, help="where the best model is saved")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--export", choices=["best", "final"], default=d.export, help="export the best-dev or the final model"
    )
    p.add_argument("--loss-reduction", choices=["paper", "elementwise"], default=d.loss_reduction)
    p.add_argument(
        "--projection-init",
        choices=["lstsq", "random"],
        default=d.projection_init,
        help="initialise the student's projection in closed form on the distillation loss, or randomly",
    )
    p.add_argument("--projection-fit-pairs", type=int, default=d.projection_fit_pairs)
    p.add_argument(
        "--projection-prior",
        choices=["procrustes", "zero"],
        default=d.projection_prior,
        help="what the closed-form fit's ridge pulls the projection towards (default procrustes; zero = plain ridge)",
    )
    p.add_argument(
        "--projection-ridge",
        type=float,
        default=None,
        help="ridge strength of the closed-form fit (default 1.0 with the procrustes prior, 0.01 with zero)",
    )
    p.add_argument(
        "--center-teacher",
        action=argparse.BooleanOptionalAction,
        default=d.center_teacher,
        help="distil into the mean-centred teacher space (default on; docs/distillation.md)",
    )
    p.add_argument(
        "--teacher-contrast",
        type=float,
        default=d.teacher_contrast,
        help="weight of the teacher-space contrastive term added to the distillation MSE (0: paper's loss only)",
    )
    p.add_argument("--teacher-contrast-scale", type=float, default=d.teacher_contrast_scale)
    p.add_argument(
        "--teacher-negatives",
        type=int,
        default=d.teacher_negatives,
        help="bank size: teacher vectors of other training sentences used as negatives",
    )
    p.add_argument("--train-embeddings", action="store_true", help="also update the word-embedding matrix")
    p.add_argument("--train-layers", type=int, default=None, help="train only the top N transformer layers")
    p.add_argument("--sampling", choices=["balanced", "proportional"], default=d.sampling)
    p.add_argument(
        "--test-sentences",
        type=int,
        default=d.test_sentences,
        help="verses per language in the final table (0: skip)",
    )
    p.add_argument(
        "--cache-dir", type=Path, default=None, help="teacher-vector and model cache (default: user cache)"
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    r = p.add_argument_group("robustness")
    r.add_argument("--save-every", type=int, default=None, help="write a resumable checkpoint every N steps")
    r.add_argument("--keep-last", type=int, default=d.keep_last, help="checkpoints to keep")
    r.add_argument(
        "--resume", action="store_true", help="continue from the newest good checkpoint in --output"
    )
    r.add_argument("--force-resume", action="store_true", help="resume even if the corpus changed")
    r.add_argument(
        "--skip-nonfinite", type=int, default=0, help="skip up to N batches with NaN/Inf loss or gradient"
    )
    r.add_argument("--drop-identical", action="store_true", help="drop pairs whose source equals the target")
    m = p.add_argument_group("MEXMA (REFERENCE.md §2)")
    m.add_argument("--mask-ratio", type=float, default=d.mask_ratio)
    m.add_argument("--unmasking", choices=["cross", "mono"], default=d.unmasking)
    m.add_argument("--token-gradients", choices=["on", "off"], default="on")
    m.add_argument("--align", choices=["clean", "masked", "masked_clean"], default=d.align)
    m.add_argument("--koleo-weight", type=float, default=d.koleo_weight)
    m.add_argument("--head-layers", type=int, default=d.head_layers)
    m.add_argument("--head-heads", type=int, default=d.head_heads)
    c = p.add_argument_group("contrastive (LaBSE-style)")
    c.add_argument("--contrastive-scale", type=float, default=d.contrastive_scale)
    c.add_argument("--contrastive-margin", type=float, default=d.contrastive_margin)
    p.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    from babelspace.evaluation.report import format_table
    from babelspace.training.trainer import train

    t0 = time.perf_counter()
    cfg = config_from_args(args)
    result = train(cfg)
    print(f"\nsaved best model (step {result.best_step}) to {result.output}")
    print("dev at best step: " + ", ".join(f"{k}={v:.3f}" for k, v in result.best_dev.items()))
    for line in result.data_report:
        print("data: " + line)
    timings = dict(result.timings)
    if cfg.test_sentences and "bible" in cfg.data:
        t_table = time.perf_counter()
        rows = _held_out_table(cfg, result.output)
        timings["final_table"] = time.perf_counter() - t_table
        print(f"\nHeld-out Bible test books ({cfg.test_sentences} verses per language), top-1 accuracy %:")
        print(format_table(rows, columns=list(rows[0].keys())))
    total = time.perf_counter() - t0
    print(
        "\ntime: "
        + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
        + f"; total {total:.1f}s; training {result.pairs_per_second:.1f} pairs/s; peak RSS {_peak_rss_mb():.0f} MB"
    )
    return 0


def config_from_args(args: argparse.Namespace):
    """TrainConfig from parsed arguments: every option named like a config field carries over."""
    from dataclasses import fields

    from babelspace.training.config import TrainConfig

    values = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if hasattr(args, f.name)}
    values["langs"] = _langs(args.langs)
    values["freeze_embeddings"] = not args.train_embeddings
    values["token_gradients"] = args.token_gradients == "on"
    if args.max_steps is None and args.epochs is None:
        values["max_steps"] = TrainConfig().max_steps
    return TrainConfig(**values)


def _held_out_table(cfg, output: Path) -> list[dict]:
    from babelspace.encoder import load_encoder
    from babelspace.training.summary import before_after_table, held_out_texts

    teacher = load_encoder(cfg.teacher, max_seq_length=cfg.max_seq_length)
    before = load_encoder(
        cfg.student if cfg.student != "teacher" else cfg.teacher, max_seq_length=cfg.max_seq_length
    )
    after = load_encoder(str(output), max_seq_length=cfg.max_seq_length)
    en, per_lang = held_out_texts(cfg.langs, cfg.test_sentences, cfg.seed)
    return before_after_table(teacher, before, after, en, per_lang)


# ----------------------------------------------------------------------------- encode
def add_encode_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("encode", help="encode a file (one sentence per line) to a .npy of normalised float32")
    p.add_argument("model", help="'minilm', 'e5-small', a sentence-transformers folder or a hub id")
    p.add_argument("file", type=Path)
    p.add_argument("--out", type=Path, required=True, help="output .npy")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-seq-length", type=int, default=None)
    from babelspace.export_cli import add_backend_arguments

    add_backend_arguments(p)
    p.set_defaults(func=run_encode)


def run_encode(args: argparse.Namespace) -> int:
    import numpy as np

    from babelspace.backends import load_backend_encoder, validate_backend
    from babelspace.encoder import encode
    from babelspace.errors import CorpusFormatError

    validate_backend(args.backend, args.quantize)
    if not args.file.is_file():
        raise BabelspaceError(f"input file not found: {args.file}")
    texts: list[str] = []
    with open(args.file, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                raise CorpusFormatError(args.file, lineno, f"invalid UTF-8 ({exc.reason})") from exc
            texts.append(line)
    model = load_backend_encoder(args.model, args.backend, args.quantize, max_seq_length=args.max_seq_length)
    vecs = encode(model, texts, batch_size=args.batch_size, show_progress=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, vecs)
    print(f"wrote {vecs.shape[0]} x {vecs.shape[1]} float32 vectors to {args.out}")
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
    for noisy in ("sentence_transformers", "transformers", "httpx", "urllib3", "datasets", "faiss"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
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
