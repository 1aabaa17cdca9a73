"""The before/after table that ends ``babelspace train`` on held-out parallel text.

For each language: the untrained student's own xx->en / en->xx accuracy, the trained student's own
accuracy, the trained student's xx vectors retrieving the *teacher's* English vectors (does the
student now live in the teacher's space?), the untrained student in the teacher's space (chance:
two unrelated spaces) and the teacher itself on both sides, for reference.

The teacher and the untrained student do not change between runs: :func:`held_out_table` caches
their vectors by model content hash and test-data fingerprint (:func:`baseline_vectors`), so only the
trained student is encoded on a second run.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.metrics.tatoeba import top1_accuracy
from babelspace.models.encoder import encode

logger = logging.getLogger(__name__)

Vectors = tuple[np.ndarray, dict[str, np.ndarray]]

COLUMNS = (
    "lang",
    "before xx>en",
    "before en>xx",
    "after xx>en",
    "after en>xx",
    "after xx>T(en)",
    "centred xx>T(en)",
    "before xx>T(en)",
    "teacher xx>en",
    "teacher en>xx",
)


def tuned_space(cfg: Any) -> str:
    """Which space the run's model is tuned for (the final table's summary line names it): the one
    its teacher-space contrastive term ranks in, against the teacher's raw vectors."""
    if "distill" not in cfg.objective_names:
        return "own space (no teacher)"
    if not cfg.teacher_contrast:
        return "teacher space, MSE only (no contrastive term; the MSE is the same in both spaces)"
    if cfg.center_teacher and cfg.export_space == "teacher" and cfg.teacher_contrast_space == "centred":
        return "teacher space centred (the export adds the teacher mean back: column centred xx>T(en))"
    return "teacher space as exported (column after xx>T(en))"


def held_out_texts(langs: Sequence[str] | None, n: int, seed: int) -> tuple[list[str], dict[str, list[str]]]:
    """``n`` test-book verses (the same verses for every language) from the offline Bible."""
    from babelspace.data.bible import bible_languages, bible_parallel_texts

    langs = [lang for lang in (langs or bible_languages()) if lang != "en"]
    en, per_lang = bible_parallel_texts(langs, "test")
    if n and len(en) > n:
        idx = np.sort(np.random.default_rng(seed).choice(len(en), n, replace=False))
        en = [en[i] for i in idx]
        per_lang = {k: [v[i] for i in idx] for k, v in per_lang.items()}
    return en, per_lang


def _vectors(
    model: SentenceTransformer,
    en: Sequence[str],
    per_lang: dict[str, Sequence[str]],
    batch_size: int,
    normalize: bool = True,
) -> Vectors:
    def enc(texts: Sequence[str]) -> np.ndarray:
        return encode(model, texts, batch_size=batch_size, show_progress=False, normalize=normalize)

    return enc(en), {lang: enc(texts) for lang, texts in per_lang.items()}


def table_from_vectors(
    teacher: Vectors, before: Vectors, after: Vectors, shift: np.ndarray | None = None
) -> list[dict[str, float | str]]:
    """The final table from each model's (English vectors, {lang: vectors}), plus a ``mean`` row.
    ``after`` holds the trained model's raw vectors as exported; ``shift`` (the teacher mean the
    export added back, or None) is subtracted for the ``centred xx>T(en)`` column: the same weights
    queried in the mean-centred space against the teacher's raw English vectors."""
    (t_en, t_xx), (b_en, b_xx), (a_en, a_xx) = teacher, before, after
    centre = 0.0 if shift is None else np.asarray(shift, dtype=np.float32)
    rows: list[dict[str, float | str]] = []
    for lang in t_xx:
        rows.append(
            {
                "lang": lang,
                "before xx>en": top1_accuracy(b_xx[lang], b_en),
                "before en>xx": top1_accuracy(b_en, b_xx[lang]),
                "after xx>en": top1_accuracy(a_xx[lang], a_en),
                "after en>xx": top1_accuracy(a_en, a_xx[lang]),
                "after xx>T(en)": top1_accuracy(a_xx[lang], t_en),
                "centred xx>T(en)": top1_accuracy(a_xx[lang] - centre, t_en),
                "before xx>T(en)": top1_accuracy(b_xx[lang], t_en),
                "teacher xx>en": top1_accuracy(t_xx[lang], t_en),
                "teacher en>xx": top1_accuracy(t_en, t_xx[lang]),
            }
        )
    mean: dict[str, float | str] = {"lang": "mean"}
    for col in COLUMNS[1:]:
        mean[col] = float(np.mean([r[col] for r in rows]))
    rows.append(mean)
    return rows


def before_after_table(
    teacher: SentenceTransformer,
    before: SentenceTransformer,
    after: SentenceTransformer,
    en: Sequence[str],
    per_lang: dict[str, Sequence[str]],
    batch_size: int = 64,
) -> list[dict[str, float | str]]:
    """The final table from three loaded models (every text encoded by each; no cache)."""
    logger.info("held-out table: %d verses x %d languages", len(en), len(per_lang))
    vecs = [_vectors(m, en, per_lang, batch_size) for m in (teacher, before, after)]
    return table_from_vectors(*vecs)


# ----------------------------------------------------------------------------- cached baselines
def data_fingerprint(en: Sequence[str], per_lang: dict[str, Sequence[str]], *settings: object) -> str:
    """sha256 of the test texts (every language, in order) and the encoding settings."""
    h = hashlib.sha256(repr(settings).encode())
    for lang, texts in (("en", en), *per_lang.items()):
        h.update(f"\x00{lang}\x00{len(texts)}".encode())
        for t in texts:
            h.update(t.encode("utf-8") + b"\x00")
    return h.hexdigest()[:20]


def _model_key(spec: str) -> str | None:
    """Content hash of a local model (None for a hub id: such a model is not cached)."""
    from babelspace.hashing import model_content_hash
    from babelspace.resources import resolve_model

    path = Path(resolve_model(spec))
    return model_content_hash(path) if path.is_dir() else None


def baseline_vectors(
    spec: str,
    en: Sequence[str],
    per_lang: dict[str, Sequence[str]],
    *,
    max_seq_length: int | None = None,
    backend: str = "torch",
    quantize: str = "none",
    cache_dir: str | Path | None = None,
    batch_size: int = 64,
) -> Vectors:
    """Vectors of a model that training does not change (the teacher, the untrained student).

    Stored under ``<cache>/held-out/`` keyed by the model's content hash and the fingerprint of the
    texts and encoding settings, so a second run with the same models and test data encodes nothing,
    and a changed model (other bytes) or other test data is encoded afresh."""
    from babelspace.models.backends import load_backend_encoder
    from babelspace.resources import cache_dir as default_cache

    key = _model_key(spec)
    fp = data_fingerprint(en, per_lang, max_seq_length, backend, quantize)
    path = Path(cache_dir or default_cache()) / "held-out" / f"{key}-{fp}.npz"
    cached = _read_cached(path, spec, en, per_lang) if key is not None else None
    if cached is not None:
        return cached
    model = load_backend_encoder(spec, backend, quantize, max_seq_length=max_seq_length)
    vecs = _vectors(model, en, per_lang, batch_size)
    if key is not None:
        _write_cached(path, vecs)
    return vecs


def _read_cached(
    path: Path, spec: str, en: Sequence[str], per_lang: dict[str, Sequence[str]]
) -> Vectors | None:
    """The cached vectors at ``path``, or None when absent or unusable (truncated, wrong shape,
    non-finite: such a file is removed with a warning and rebuilt)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            vecs = z["en"], {lang: z[f"xx_{lang}"] for lang in per_lang}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        problem = f"unreadable ({type(exc).__name__}: {exc})"
    else:
        problem = _cached_problem(vecs, en, per_lang)
        if problem is None:
            logger.info("held-out table: cached vectors of %s (%s)", spec, path.name)
            return vecs
    logger.warning("held-out table: cache file %s is %s; encoding again", path, problem)
    path.unlink(missing_ok=True)
    return None


def _cached_problem(vecs: Vectors, en: Sequence[str], per_lang: dict[str, Sequence[str]]) -> str | None:
    arrays = [(vecs[0], len(en)), *((vecs[1][lang], len(t)) for lang, t in per_lang.items())]
    dims = {a.shape[1] if a.ndim == 2 else -1 for a, _ in arrays}
    if len(dims) != 1 or any(a.ndim != 2 or len(a) != n for a, n in arrays):
        return "of the wrong shape"
    if not all(np.isfinite(a).all() for a, _ in arrays):
        return "holding non-finite values"
    return None


def _write_cached(path: Path, vecs: Vectors) -> None:
    """Write atomically; a cache that cannot be written costs only re-encoding next time."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(tmp, en=vecs[0], **{f"xx_{lang}": v for lang, v in vecs[1].items()})
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        logger.warning("held-out table: cannot cache vectors in %s (%s)", path.parent, exc.strerror or exc)


def held_out_table(
    cfg: Any, output: str | Path, backend: str = "torch", quantize: str = "none"
) -> list[dict[str, float | str]]:
    """The table that ends ``babelspace train``: ``cfg.test_sentences`` Bible test-book verses per
    language. The teacher's and untrained student's vectors come from :func:`baseline_vectors`
    (cached); only the trained model at ``output`` is encoded every run."""
    from babelspace.models.backends import load_backend_encoder

    en, per_lang = held_out_texts(cfg.langs, cfg.test_sentences, cfg.seed)
    logger.info("held-out table: %d verses x %d languages", len(en), len(per_lang))
    common = {
        "max_seq_length": cfg.max_seq_length,
        "backend": backend,
        "quantize": quantize,
        "cache_dir": getattr(cfg, "cache_dir", None),
    }
    teacher = baseline_vectors(cfg.teacher, en, per_lang, **common)
    before_spec = cfg.student if cfg.student != "teacher" else cfg.teacher
    before = baseline_vectors(before_spec, en, per_lang, **common)
    after_model = load_backend_encoder(str(output), backend, quantize, max_seq_length=cfg.max_seq_length)
    after = _vectors(after_model, en, per_lang, 64, normalize=False)
    return table_from_vectors(teacher, before, after, exported_shift(output))


def exported_shift(output: str | Path) -> np.ndarray | None:
    """The teacher mean the export added back (``SHIFT_FILE`` beside the model), or None."""
    from babelspace.training.output.export import SHIFT_FILE

    path = Path(output) / SHIFT_FILE
    return np.load(path) if path.is_file() else None
