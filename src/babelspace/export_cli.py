"""``babelspace export MODEL --backend onnx|openvino [--quantize int8] [--out DIR]``, and the shared
``--backend``/``--quantize`` options of ``eval``, ``encode`` and ``mine``.

The export writes sentence-transformers' own backend files into the model's folder (or a copy at
``--out``), so plain sentence-transformers loads it without babelspace installed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from babelspace.backends import BACKENDS, QUANTIZATIONS

__all__ = ["add_backend_arguments", "add_export_parser", "run_export"]


def add_backend_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add ``--backend`` and ``--quantize`` (validated together by :func:`babelspace.backends.validate_backend`)."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="torch",
        help="inference backend: torch (default), onnx (ONNX Runtime) or openvino; exported once per "
        "model into the cache (docs/performance.md, 'Encoding backends')",
    )
    parser.add_argument(
        "--quantize",
        choices=QUANTIZATIONS,
        default="none",
        help="int8: ONNX Runtime dynamic / OpenVINO static int8 quantisation (onnx or openvino only)",
    )


def add_export_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "export",
        help="export a model to ONNX or OpenVINO (fp32 or int8) for fast CPU inference",
        description=(
            "Write sentence-transformers' ONNX/OpenVINO files into MODEL's folder (or a copy of it at "
            "--out). The command prints the SentenceTransformer(...) call that loads the result."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("model", help="'minilm', 'e5-small' or a local sentence-transformers folder")
    p.add_argument(
        "--backend",
        choices=[b for b in BACKENDS if b != "torch"],
        required=True,
        help="the runtime to export for",
    )
    p.add_argument(
        "--quantize",
        choices=QUANTIZATIONS,
        default="none",
        help="int8: quantised export (docs/performance.md)",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="write a copy of the model with the export here instead"
    )
    p.set_defaults(func=run_export)
    return p


def run_export(args: argparse.Namespace) -> int:
    from babelspace.backends import export_backend
    from babelspace.logging_setup import quiet_third_party

    quiet_third_party()
    folder, file_name = export_backend(args.model, args.backend, args.quantize, out=args.out)
    print(f"wrote {folder / file_name}")
    print(
        "load it with sentence-transformers alone:\n"
        f"  SentenceTransformer({str(folder)!r}, backend={args.backend!r}, "
        f"model_kwargs={{'file_name': {file_name!r}}})"
    )
    return 0
