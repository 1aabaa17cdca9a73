"""``babelspace export MODEL --backend onnx|openvino [--quantize int8] [--out DIR]``.

The export writes sentence-transformers' own backend files into the model's folder (or a copy at
``--out``), so plain sentence-transformers loads it without babelspace installed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from babelspace.models.backends import BACKENDS, QUANTIZATIONS

__all__ = ["add_export_parser", "run_export"]


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
        help="onnx (ONNX Runtime) or openvino",
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
    p.set_defaults(func=run_export)
    return p


def run_export(args: argparse.Namespace) -> int:
    from babelspace.logging_setup import quiet_third_party
    from babelspace.models.backends import export_backend

    quiet_third_party()
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


def _same_folder(out: Path, model: str) -> bool:
    return Path(model).is_dir() and out.resolve() == Path(model).resolve()
