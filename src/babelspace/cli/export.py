"""``babelspace export MODEL --backend onnx|openvino [--quantize int8] [--out DIR]`` and
``babelspace export MODEL --static --out DIR``.

The backend export writes sentence-transformers' own backend files into the model's folder (or a copy
at ``--out``); the static export distils MODEL into a ``StaticEmbedding`` model in the same output
space (:mod:`babelspace.models.static`). Either way plain sentence-transformers loads the result
without babelspace installed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from babelspace.models.backends import BACKENDS, QUANTIZATIONS

__all__ = ["STATIC_CHECK_SENTENCES", "add_export_parser", "run_export"]

#: Sentences of --static-vocab-from (none of the map's fit) that the static model's card is measured on.
STATIC_CHECK_SENTENCES = 200


def add_export_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "export",
        help="export a model to ONNX or OpenVINO (fp32 or int8), or distil it into a static model",
        description=(
            "Write sentence-transformers' ONNX/OpenVINO files into MODEL's folder (or a copy of it at "
            "--out), or (--static) distil MODEL into a static token-vector model at --out that encodes "
            "orders of magnitude faster, in MODEL's output space. The command prints the "
            "SentenceTransformer(...) call that loads the result."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("model", help="'minilm', 'e5-small' or a local sentence-transformers folder")
    p.add_argument(
        "--backend",
        choices=[b for b in BACKENDS if b != "torch"],
        default=None,
        help="onnx (ONNX Runtime) or openvino (give this or --static)",
    )
    p.add_argument(
        "--quantize",
        choices=QUANTIZATIONS,
        default="none",
        help="int8: ONNX Runtime dynamic / OpenVINO static int8 quantisation",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="write a copy of the model with the export here instead"
    )
    _add_static_arguments(p.add_argument_group("static student (--static)"))
    p.set_defaults(func=run_export)
    return p


def _add_static_arguments(g: argparse._ArgumentGroup) -> None:
    from babelspace.cli.argtypes import non_negative_int, positive_int

    g.add_argument(
        "--static",
        action="store_true",
        help="distil MODEL into a StaticEmbedding model (one vector per vocabulary token, run through "
        "MODEL once; MODEL's modules after its pooling kept) at --out",
    )
    g.add_argument(
        "--static-vocab-from",
        nargs="+",
        type=Path,
        default=None,
        metavar="FILE",
        help="one-sentence-per-line files: distil only the tokens they contain (default: the whole vocabulary)",
    )
    g.add_argument(
        "--static-vocab", type=positive_int, default=None, help="at most this many tokens (the lowest ids)"
    )
    g.add_argument(
        "--static-fit",
        type=non_negative_int,
        default=5000,
        metavar="N",
        help="fit a linear map from the static mean onto MODEL's pooled vectors on N sentences of "
        "--static-vocab-from (0 or no --static-vocab-from: no map)",
    )
    g.add_argument(
        "--static-weighting",
        choices=["zipf", "none"],
        default="zipf",
        help="token weights of the mean: zipf (log(2 + id), rarer pieces weigh more) or none",
    )
    g.add_argument(
        "--device", default="auto", help="device MODEL runs on while distilling (auto, cpu, cuda, ...)"
    )


def run_export(args: argparse.Namespace) -> int:
    from babelspace.errors import BabelspaceError
    from babelspace.logging_setup import quiet_third_party
    from babelspace.models.backends import export_backend

    quiet_third_party()
    if args.static == (args.backend is not None):
        raise BabelspaceError("give --backend onnx|openvino or --static (one of the two)")
    if args.static:
        return run_static_export(args)
    if args.out is not None and not _same_folder(args.out, args.model):  # --out MODEL: in place
        from babelspace.writable import check_output_apart

        check_output_apart(args.out, "--out", models=[("MODEL", args.model)], folder=True)
    folder, file_name = export_backend(args.model, args.backend, args.quantize, out=args.out)
    print(f"wrote {folder / file_name}")
    print(
        "load it with sentence-transformers alone:\n"
        f"  SentenceTransformer({str(folder)!r}, backend={args.backend!r}, "
        f"model_kwargs={{'file_name': {file_name!r}}})"
    )
    return 0


def run_static_export(args: argparse.Namespace) -> int:
    from babelspace.errors import BabelspaceError
    from babelspace.writable import check_output_apart

    if args.out is None:
        raise BabelspaceError("--static needs --out DIR (a new folder for the static model)")
    if args.quantize != "none":
        raise BabelspaceError("--quantize applies to --backend exports, not to --static")
    files = list(args.static_vocab_from or [])
    check_output_apart(args.out, "--out", inputs=[("--static-vocab-from", f) for f in files],
                       models=[("MODEL", args.model)], folder=True)  # fmt: skip
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        raise BabelspaceError(f"--out {args.out} exists and is not an empty folder: give a new folder")
    from babelspace.models.encoder import load_encoder
    from babelspace.models.static import check_against_parent, distil_static, distilled_tokens, static_card
    from babelspace.training.output.model_card import base_model_id

    texts = _vocab_texts(files) if files else None
    parent = load_encoder(args.model, device=args.device)
    fit = _sample(texts, args.static_fit) if texts else None
    model = distil_static(
        parent, vocab_size=args.static_vocab, texts=texts, fit_texts=fit, weighting=args.static_weighting
    )
    fitted = set(fit or [])
    held_out = _sample(sorted({t for t in texts or [] if t not in fitted}), STATIC_CHECK_SENTENCES)
    check = check_against_parent(model, parent, held_out) if len(held_out) >= 2 else None
    card = static_card(
        str(args.model), model, weighting=args.static_weighting, vocab_files=[str(f) for f in files],
        fit_sentences=len(fit or []), check=check, base_model=base_model_id(str(args.model)), model_id=str(args.out),
    )  # fmt: skip
    _save_new_folder(model, args.out, card)
    print(f"wrote a static model ({distilled_tokens(model):,} token vectors) to {args.out}")
    print(f"load it with sentence-transformers alone:\n  SentenceTransformer({str(args.out)!r})")
    return 0


def _sample(texts: list[str], n: int) -> list[str]:
    import random

    return texts if len(texts) <= n else random.Random(0).sample(texts, n)


def _vocab_texts(files: list[Path]) -> list[str]:
    from babelspace.mining.corpus import read_sentences

    texts: list[str] = []
    for f in files:
        texts.extend(read_sentences(f, ids=False).texts)
    return texts


def _save_new_folder(model, out: Path, card: str | None = None) -> None:  # noqa: ANN001 - a SentenceTransformer
    """Save into a temporary sibling folder, then rename it to ``out`` (no half-written model). The
    sibling is made with ``mkdir``, so the folder gets the user's usual permissions (its umask), not
    the owner-only mode ``tempfile.mkdtemp`` gives."""
    import secrets
    import shutil

    out.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = out.parent / f".{out.name}.new-{secrets.token_hex(4)}"
        try:
            tmp.mkdir()
            break
        except FileExistsError:
            continue
    try:
        model.save(str(tmp))
        if card is not None:
            (tmp / "README.md").write_text(card, encoding="utf-8")  # in place of the generic card
        if out.exists():
            out.rmdir()  # checked empty above
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _same_folder(out: Path, model: str) -> bool:
    return Path(model).is_dir() and out.resolve() == Path(model).resolve()
