"""Fast CPU inference: a model on sentence-transformers' ONNX Runtime or OpenVINO backend, fp32 or int8.

``load_backend_encoder("e5-small", backend="onnx", quantize="int8")`` returns an ordinary
``SentenceTransformer`` whose transformer runs on ONNX Runtime with dynamically quantised int8
weights. The exported files are written once per model into the cache, under
``<cache>/backends/<content hash>/``, keyed by :func:`babelspace.hashing.model_content_hash` (the
bytes of the model's weight and config files), so a model retrained in place gets a fresh export
and a renamed copy reuses the old one. :func:`export_backend` writes the same files into any
sentence-transformers folder (``babelspace export``), where plain sentence-transformers loads them::

    SentenceTransformer(folder, backend="onnx", model_kwargs={"file_name": "onnx/model_qint8_avx512_vnni.onnx"})

int8 flavours: ONNX uses ONNX Runtime dynamic quantisation (int8 weights, activations quantised on
the fly; no calibration data). OpenVINO uses NNCF post-training static quantisation calibrated on
``calibration_texts`` (default: a fixed, seeded sample of verses from the offline Bible's *training*
books, never its dev/test books; a few built-in sentences when the Bible is not installed).
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from babelspace.errors import ResourceError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "openvino")
QUANTIZATIONS = ("none", "int8")
_LINKED_SKIP = {"onnx", "openvino", "checkpoints", "README.md"}
CALIBRATION_SAMPLES = 300
_FALLBACK_CALIBRATION = (
    "In the beginning was the Word.",
    "Der Herr ist mein Hirte, mir wird nichts mangeln.",
    "Au commencement, Dieu créa les cieux et la terre.",
    "Блаженны нищие духом, ибо их есть Царство Небесное.",
    "太初有道，道与神同在。",
    "في البدء كان الكلمة",
    "Y dijo Dios: Sea la luz; y fue la luz.",
    "And God said, Let there be light: and there was light.",
)


def validate_backend(backend: str, quantize: str) -> None:
    """Raise :class:`ResourceError` for an unknown backend/quantisation or an unsupported pair."""
    if backend not in BACKENDS:
        raise ResourceError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    if quantize not in QUANTIZATIONS:
        raise ResourceError(f"unknown quantisation {quantize!r}; use one of {', '.join(QUANTIZATIONS)}")
    if backend == "torch" and quantize != "none":
        raise ResourceError("int8 needs --backend onnx or openvino (the torch backend runs fp32 only)")


def onnx_int8_config() -> str:
    """The ONNX Runtime dynamic-quantisation preset for this CPU (arm64, avx512_vnni, avx512 or avx2)."""
    if platform.machine().lower() in {"arm64", "aarch64"}:
        return "arm64"
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        flags = set()
    if "avx512_vnni" in flags:
        return "avx512_vnni"
    if "avx512f" in flags:
        return "avx512"
    return "avx2"


def backend_file_name(backend: str, quantize: str) -> str | None:
    """Relative path of the backend's model file inside a sentence-transformers folder (None: torch)."""
    validate_backend(backend, quantize)
    if backend == "onnx":
        return "onnx/model.onnx" if quantize == "none" else f"onnx/model_qint8_{onnx_int8_config()}.onnx"
    if backend == "openvino":
        return (
            "openvino/openvino_model.xml"
            if quantize == "none"
            else "openvino/openvino_model_qint8_quantized.xml"
        )
    return None


_INSTALL = {
    "onnx": "pip install 'sentence-transformers[onnx]' (its optimum-onnx needs transformers<4.58)",
    "openvino": "it runs in an environment of its own: pip install -c constraints/openvino.txt -e '.[offline]' "
    "'optimum-intel[openvino]' nncf (README, 'Installing')",
}


def _require(backend: str) -> None:
    modules = {"onnx": ("onnxruntime", "optimum.onnxruntime"), "openvino": ("openvino", "optimum.intel")}
    for name in modules.get(backend, ()):
        try:
            __import__(name)
        except ImportError as exc:
            how = _INSTALL[backend]
            raise ResourceError(
                f"backend {backend!r} needs {name} ({exc}): {how}; "
                "see docs/performance.md, 'Encoding backends', for the versions that work together"
            ) from exc


def _local_folder(spec: str) -> Path:
    from babelspace.resources import resolve_model

    path = Path(resolve_model(spec))
    if not (path / "modules.json").is_file():
        raise ResourceError(
            f"model {spec!r} ({path}) is not a local sentence-transformers folder; the onnx/openvino "
            "backends export from local folders (save the hub model with model.save(DIR) first)"
        )
    return path


def cached_backend_folder(model_dir: Path, cache_dir: Path | None = None) -> Path:
    """``<cache>/backends/<content hash>``: a folder of links to the model's files, plus exports."""
    from babelspace.hashing import model_content_hash
    from babelspace.resources import cache_dir as default_cache

    entry = Path(cache_dir or default_cache()) / "backends" / model_content_hash(model_dir)
    if (entry / "modules.json").exists():
        return entry
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=entry.parent))
    for item in model_dir.iterdir():
        if item.name not in _LINKED_SKIP:
            (tmp / item.name).symlink_to(item.resolve(), target_is_directory=item.is_dir())
    try:
        os.replace(tmp, entry)
    except OSError:  # another process made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return entry


def _onnx_fp32(folder: Path, work: Path) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), backend="onnx", device="cpu", model_kwargs={"export": True})
    model.transformers_model.save_pretrained(work)  # ST's wrapper writes work/onnx/model.onnx


def _openvino_fp32(folder: Path, work: Path) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), backend="openvino", device="cpu", model_kwargs={"export": True})
    model.transformers_model.save_pretrained(work)  # -> work/openvino/openvino_model.{xml,bin}


def _onnx_int8(folder: Path, work: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.backend import export_dynamic_quantized_onnx_model

    ensure_exported(folder, "onnx", "none")
    model = SentenceTransformer(
        str(folder), backend="onnx", device="cpu", model_kwargs={"file_name": "onnx/model.onnx"}
    )
    export_dynamic_quantized_onnx_model(model, onnx_int8_config(), str(work))


def default_calibration_texts(n: int = CALIBRATION_SAMPLES, seed: int = 0) -> list[str]:
    """Mixed-language verses from the offline Bible's training books (never dev/test books)."""
    import numpy as np

    try:
        from babelspace.data.bible import bible_languages, bible_parallel_texts

        langs = [lang for lang in bible_languages() if lang != "en"]
        en, per_lang = bible_parallel_texts(langs, "train")
    except Exception as exc:  # noqa: BLE001 - any missing corpus means: use the built-in sentences
        logger.info("calibration: offline Bible unavailable (%s); using built-in sentences", exc)
        return list(_FALLBACK_CALIBRATION)
    pools = [en, *per_lang.values()]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(pools), n), rng.integers(0, len(en), n)
    return [pools[p][i] for p, i in zip(*picks, strict=True)]


def _openvino_int8(folder: Path, work: Path, calibration_texts: Sequence[str] | None = None) -> None:
    from datasets import Dataset
    from optimum.intel.openvino import OVConfig, OVQuantizationConfig, OVQuantizer
    from sentence_transformers import SentenceTransformer

    ensure_exported(folder, "openvino", "none")
    model = SentenceTransformer(
        str(folder),
        backend="openvino",
        device="cpu",
        model_kwargs={"file_name": "openvino/openvino_model.xml"},
    )
    texts = list(calibration_texts or default_calibration_texts())
    max_len = min(int(model.max_seq_length or 128), 128)
    tokens = model.tokenizer(texts, padding="max_length", max_length=max_len, truncation=True)
    dataset = Dataset.from_dict(dict(tokens))
    config = OVQuantizationConfig(num_samples=len(texts))
    quantizer = OVQuantizer.from_pretrained(model.transformers_model)
    quantizer.quantize(dataset, save_directory=work / "ov", ov_config=OVConfig(quantization_config=config))
    out = work / "openvino"
    out.mkdir(parents=True, exist_ok=True)
    src = work / "ov" / "openvino" if (work / "ov" / "openvino").is_dir() else work / "ov"
    for suffix in (".xml", ".bin"):
        shutil.move(src / f"openvino_model{suffix}", out / f"openvino_model_qint8_quantized{suffix}")


_EXPORTERS: dict[tuple[str, str], Callable[[Path, Path], None]] = {
    ("onnx", "none"): _onnx_fp32,
    ("onnx", "int8"): _onnx_int8,
    ("openvino", "none"): _openvino_fp32,
    ("openvino", "int8"): _openvino_int8,
}


def ensure_exported(folder: Path, backend: str, quantize: str) -> Path:
    """Export ``folder``'s transformer to ``backend``/``quantize`` unless its file is already there.

    The export runs in a temporary folder and its files are moved in at the end, so an interrupted
    export leaves nothing half-written. Returns the path of the model file."""
    rel = backend_file_name(backend, quantize)
    if rel is None:
        raise ResourceError("the torch backend needs no export")
    target = folder / rel
    if target.exists():
        return target
    _require(backend)
    logger.info("exporting %s to %s (%s); done once per model", folder, backend, quantize)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=folder) as tmp, warnings.catch_warnings():
        import torch

        # torch.jit tracing warns about Python control flow in transformers' masks: expected for an export
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        _EXPORTERS[(backend, quantize)](folder, Path(tmp))
        produced = Path(tmp) / rel
        if not produced.exists():
            raise ResourceError(f"export to {backend} ({quantize}) did not produce {rel}")
        target.parent.mkdir(parents=True, exist_ok=True)
        for f in Path(tmp, rel).parent.glob(Path(rel).stem + ".*"):
            os.replace(f, target.parent / f.name)
    return target


def export_backend(
    spec: str, backend: str, quantize: str = "none", out: str | Path | None = None
) -> tuple[Path, str]:
    """Write the backend files into the model's own folder (or a copy of it at ``out``).

    Returns ``(folder, file_name)``: ``SentenceTransformer(folder, backend=backend,
    model_kwargs={"file_name": file_name})`` loads the result with plain sentence-transformers."""
    validate_backend(backend, quantize)
    if backend == "torch":
        raise ResourceError("nothing to export for the torch backend; choose onnx or openvino")
    folder = _local_folder(spec)
    if out is None or Path(out).resolve() == folder.resolve():
        target = ensure_exported(folder, backend, quantize)
        return folder, target.relative_to(folder).as_posix()
    dest = Path(out)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ResourceError(f"--out {dest} exists and is not empty")
    if not (folder / str(backend_file_name(backend, quantize))).exists():
        _require(backend)  # a missing extra is refused before anything is copied
    created = not dest.exists()
    try:
        shutil.copytree(folder, dest, ignore=shutil.ignore_patterns("checkpoints"), dirs_exist_ok=True)
        target = ensure_exported(dest, backend, quantize)
    except BaseException:  # no partial copy left behind: the retry would be refused as "not empty"
        _remove_copy(dest, created)
        raise
    return dest, target.relative_to(dest).as_posix()


def _remove_copy(dest: Path, created: bool) -> None:
    """Remove what a failed ``export --out`` copied (the folder itself when it was created)."""
    if created:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir():  # it was empty before the copy
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def load_backend_encoder(
    spec: str,
    backend: str = "torch",
    quantize: str = "none",
    device: str | None = None,
    max_seq_length: int | None = None,
    cache_dir: str | Path | None = None,
) -> SentenceTransformer:
    """Load ``spec`` (a named offline model, a local folder or a hub id) on ``backend``.

    ``torch`` is :func:`babelspace.models.encoder.load_encoder`. ``onnx``/``openvino`` export once into the
    cache (keyed by the model's content hash) and load the exported file from there."""
    from sentence_transformers import SentenceTransformer

    from babelspace.logging_setup import quiet_third_party

    validate_backend(backend, quantize)
    quiet_third_party()
    if backend == "torch":
        from babelspace.models.encoder import load_encoder

        return load_encoder(spec, device=device, max_seq_length=max_seq_length)
    folder = _local_folder(spec)
    rel = backend_file_name(backend, quantize)
    own = folder / str(rel)
    entry = folder if own.exists() else cached_backend_folder(folder, Path(cache_dir) if cache_dir else None)
    ensure_exported(entry, backend, quantize)
    from babelspace.device import resolve_device

    kwargs = {"device": str(resolve_device(device))}
    try:
        model = SentenceTransformer(str(entry), backend=backend, model_kwargs={"file_name": rel}, **kwargs)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ResourceError(f"cannot load {spec!r} on {backend} ({quantize}): {exc}") from exc
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    return model
