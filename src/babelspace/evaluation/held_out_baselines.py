"""The baseline columns of the held-out table (teacher, untrained student), shipped, cached or encoded.

They do not change between runs: they depend only on the two models (by content hash,
:func:`babelspace.models.identity.model_identity`), the test texts and the encoding settings.
:func:`baseline_scores` takes them from the scores shipped with the package for the default models
(``held_out_baselines.json``, written by ``bench/held_out_baselines.py``), else from the cache
(``<cache>/held-out/``: their scores, and each model's vectors in a vector store), else encodes them once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.errors import ResourceError
from babelspace.evaluation.held_out import BASELINE_COLUMNS, Vectors, baseline_columns, encode_texts
from babelspace.models import backends
from babelspace.models.identity import model_identity
from babelspace.resources import cache_dir as resources_cache_dir
from babelspace.vectors.shards import Manifest, ShardStore
from babelspace.writable import atomic_write_text

logger = logging.getLogger(__name__)

#: Scores of the default models, shipped with the package (``bench/held_out_baselines.py``).
SHIPPED_BASELINES = Path(__file__).with_name("held_out_baselines.json")


def data_fingerprint(en: Sequence[str], per_lang: dict[str, Sequence[str]], *settings: object) -> str:
    """sha256 of the test texts (every language, in order) and the encoding settings."""
    h = hashlib.sha256(repr(settings).encode())
    for lang, texts in (("en", en), *per_lang.items()):
        h.update(f"\x00{lang}\x00{len(texts)}".encode())
        for t in texts:
            h.update(t.encode("utf-8") + b"\x00")
    return h.hexdigest()[:20]


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

    Stored under ``<cache>/held-out/`` as a :class:`~babelspace.vectors.shards.ShardStore` keyed by
    the model's content hash and the fingerprint of the texts and encoding settings, so a second
    run with the same models and test data encodes nothing, and a changed model (other bytes) or
    other test data is encoded afresh."""
    ident = model_identity(spec)
    root = Path(cache_dir or resources_cache_dir()) / "held-out"

    def store_of(langs: dict[str, Sequence[str]]) -> tuple[ShardStore, str]:
        fp = data_fingerprint(en, langs, max_seq_length, backend, quantize)
        return ShardStore(root / f"{ident.content_hash}-{fp}"), fp

    if ident.content_hash is not None:
        cached = _read_cached(store_of(per_lang)[0], spec, en, per_lang)
        if cached is not None:
            return cached
    model = backends.load_backend_encoder(spec, backend, quantize, max_seq_length=max_seq_length)
    vecs = encode_texts(model, en, per_lang, batch_size)
    logger.info("held-out table: encoded %d texts with %s", len(en) + sum(map(len, per_lang.values())), spec)
    if ident.content_hash is not None:
        _write_cached(*store_of(per_lang), ident.key(), en, per_lang, vecs)
        if per_lang:  # the English side alone too: what a run whose scores are cached still needs
            _write_cached(*store_of({}), ident.key(), en, {}, (vecs[0], {}))
    return vecs


def _rows(en: Sequence[str], per_lang: dict[str, Sequence[str]]) -> list[str]:
    """The texts of a store, in its row order: English, then each language's."""
    return [*en, *(t for texts in per_lang.values() for t in texts)]


def _read_cached(
    store: ShardStore, spec: str, en: Sequence[str], per_lang: dict[str, Sequence[str]]
) -> Vectors | None:
    """The cached vectors in ``store``, or None when absent or unusable (a damaged shard, another
    shape, non-finite values: such a store is removed with a warning and rebuilt)."""
    texts = _rows(en, per_lang)
    try:
        manifest = store.read_manifest()
    except ResourceError as exc:
        problem = f"unreadable ({exc})"
    else:
        if manifest is None:
            return None
        if manifest.n != len(texts) or manifest.dtype != "float32":
            problem = f"of another shape ({manifest.n} {manifest.dtype} rows, not {len(texts)} float32)"
        elif store.missing_shards(texts):
            problem = "damaged"
        else:
            logger.info("held-out table: cached vectors of %s (%s)", spec, store.directory.name)
            return _split(store.load_all(), en, per_lang)
    logger.warning("held-out table: cached vectors in %s are %s; encoding again", store.directory, problem)
    shutil.rmtree(store.directory, ignore_errors=True)
    return None


def _split(rows: np.ndarray, en: Sequence[str], per_lang: dict[str, Sequence[str]]) -> Vectors:
    out, start = {}, len(en)
    for lang, texts in per_lang.items():
        out[lang] = rows[start : start + len(texts)]
        start += len(texts)
    return rows[: len(en)], out


def _write_cached(
    store: ShardStore,
    fp: str,
    model: str,
    en: Sequence[str],
    per_lang: dict[str, Sequence[str]],
    vecs: Vectors,
) -> None:
    """One shard of every row; a cache that cannot be written costs only re-encoding next time."""
    rows = np.vstack([vecs[0], *(vecs[1][lang] for lang in per_lang)]).astype(np.float32, copy=False)
    manifest = Manifest(
        model=model,
        dim=rows.shape[1],
        dtype="float32",
        shard_size=max(len(rows), 1),
        n=len(rows),
        fingerprint=fp,
    )
    try:
        store.initialise(manifest)
        store.write_shard(0, rows, _rows(en, per_lang))
    except OSError as exc:
        logger.warning(
            "held-out table: cannot cache vectors in %s (%s)", store.directory, exc.strerror or exc
        )
    except ResourceError as exc:  # non-finite or non-unit vectors are not stored
        logger.warning("held-out table: cannot cache vectors in %s (%s)", store.directory, exc)


def baseline_scores(
    teacher_spec: str, before_spec: str, en: Sequence[str], per_lang: dict[str, Sequence[str]], **common: Any
) -> tuple[dict[str, dict[str, float]], np.ndarray]:
    """Per language the :data:`BASELINE_COLUMNS` of the teacher ``teacher_spec`` and the untrained
    student ``before_spec``, and the teacher's English vectors (the trained model's ``xx>T(en)``
    columns query them). The scores come from the package (:data:`SHIPPED_BASELINES`) or the cache
    when both models are local folders whose content hashes, the texts and the settings match; else
    from the models' (cached) vectors."""
    t_key, s_key, fp = scores_key(teacher_spec, before_spec, en, per_lang, **common)
    keys = (t_key, s_key)
    path = (
        Path(common.get("cache_dir") or resources_cache_dir())
        / "held-out"
        / f"scores-{t_key}-{s_key}-{fp}.json"
    )
    scores = None
    if None not in keys:
        scores = _shipped_scores(keys, fp, per_lang) or _read_scores(path, per_lang)
    if scores is not None:
        teacher_en, _ = baseline_vectors(teacher_spec, en, {}, **common)
        return scores, teacher_en
    teacher = baseline_vectors(teacher_spec, en, per_lang, **common)
    before = baseline_vectors(before_spec, en, per_lang, **common)
    scores = baseline_columns(teacher, before)
    if None not in keys:
        _write_scores(path, {"teacher": keys[0], "student": keys[1], "data": fp, "scores": scores})
    return scores, teacher[0]


def scores_key(
    teacher: str, student: str, en: Sequence[str], per_lang: dict[str, Sequence[str]], **common: Any
) -> tuple[str | None, str | None, str]:
    """What baseline scores are keyed by: the teacher's and the untrained student's content hashes
    (None for a hub id) and the fingerprint of the texts and encoding settings."""
    settings = (common.get("max_seq_length"), common.get("backend", "torch"), common.get("quantize", "none"))
    return (
        model_identity(teacher).content_hash,
        model_identity(student).content_hash,
        data_fingerprint(en, per_lang, *settings),
    )


def _valid_scores(scores: Any, per_lang: dict[str, Sequence[str]]) -> dict[str, dict[str, float]] | None:
    """``scores`` when it holds every language and baseline column as a number in [0, 100]."""
    try:
        out = {lang: {col: float(scores[lang][col]) for col in BASELINE_COLUMNS} for lang in per_lang}
    except (KeyError, TypeError, ValueError):
        return None
    ok = all(0.0 <= v <= 100.0 for row in out.values() for v in row.values())
    return out if ok else None


def _shipped_scores(
    keys: tuple[str | None, str | None], fp: str, per_lang: dict[str, Sequence[str]]
) -> dict[str, dict[str, float]] | None:
    try:
        entries = json.loads(SHIPPED_BASELINES.read_text())["entries"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for entry in entries:
        if (entry.get("teacher"), entry.get("student"), entry.get("data")) == (*keys, fp):
            logger.info("held-out table: baseline scores shipped with the package (%s)", entry.get("models"))
            return _valid_scores(entry.get("scores"), per_lang)
    return None


def _read_scores(path: Path, per_lang: dict[str, Sequence[str]]) -> dict[str, dict[str, float]] | None:
    if not path.is_file():
        return None
    try:
        scores = _valid_scores(json.loads(path.read_text()).get("scores"), per_lang)
    except (OSError, ValueError, AttributeError):
        scores = None
    if scores is None:
        logger.warning("held-out table: cache file %s is unreadable; encoding again", path)
        path.unlink(missing_ok=True)
    else:
        logger.info("held-out table: cached baseline scores (%s)", path.name)
    return scores


def _write_scores(path: Path, record: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(record, indent=1))
    except OSError as exc:
        logger.warning("held-out table: cannot cache scores in %s (%s)", path.parent, exc.strerror or exc)
