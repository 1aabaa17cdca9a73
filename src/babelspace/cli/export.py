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

from babelspace.cli.config_flags import DefaultsFormatter
from babelspace.models.backends import BACKENDS, QUANTIZATIONS

__all__ = ["add_export_parser", "run_export"]


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
        formatter_class=DefaultsFormatter,
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
        "--out",
        type=Path,
        default=None,
        help="write a copy of the model with the export here (default: into MODEL's own folder)",
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
        help="one-sentence-per-line files: distil only the tokens they contain (default: the whole "
        "vocabulary)",
    )
    g.add_argument(
        "--static-vocab",
        type=positive_int,
        default=None,
        help="at most this many tokens (the lowest ids; default: no limit)",
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
    from babelspace.api import export
    from babelspace.errors import BabelspaceError
    from babelspace.logging_setup import quiet_third_party

    quiet_third_party()
    if args.static == (args.backend is not None):
        raise BabelspaceError("give --backend onnx|openvino or --static (one of the two)")
    if args.static and args.out is None:
        raise BabelspaceError("--static needs --out DIR (a new folder for the static model)")
    if args.static and args.quantize != "none":
        raise BabelspaceError("--quantize applies to --backend exports, not to --static")
    result = export(
        args.model,
        args.out,
        backend=args.backend,
        static=args.static,
        quantize=args.quantize,
        static_vocab_from=args.static_vocab_from,
        static_vocab=args.static_vocab,
        static_fit=args.static_fit,
        static_weighting=args.static_weighting,
        device=args.device,
    )
    print(result)
    return 0
