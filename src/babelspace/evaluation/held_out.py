"""The before/after table that ends ``babelspace train`` on held-out parallel text.

For each language: the untrained student's own xx->en / en->xx accuracy, the trained student's own
accuracy, the trained student's xx vectors retrieving the *teacher's* English vectors (does the
student now live in the teacher's space?), the untrained student in the teacher's space (chance:
two unrelated spaces) and the teacher itself on both sides, for reference. A last row gives the
95% confidence half-width of each mean over the verses drawn (:func:`mean_ci`).

The baseline columns (teacher, untrained student) do not change between runs; they depend only on
the two models (by content hash), the test texts and the encoding settings. :func:`baseline_scores`
takes them from the scores shipped with the package for the default models
(``held_out_baselines.json``, written by ``bench/held_out_baselines.py``), else from the cache
(``<cache>/held-out/``: their scores, and each model's vectors), else encodes them once. A run then
encodes the trained model's texts and, for the columns that query the teacher's English vectors,
the teacher's English verses (cached too): each distinct text once per model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.metrics.sts import cosine_rowwise
from babelspace.metrics.tatoeba import top1_accuracy
from babelspace.models.encoder import encode
from babelspace.writable import atomic_open, write_json

logger = logging.getLogger(__name__)

Vectors = tuple[np.ndarray, dict[str, np.ndarray]]

#: The label of the last row: the 95% confidence half-width of each column's mean.
CI_ROW = "±95% CI"
#: Key of the ``mean`` row (only): mean cosine between the trained model's and the teacher's vector of
#: the same English test verse, the drop-in check (1.0 would be the teacher itself).
DROP_IN_COSINE = "en cos T(en)"
#: Scores of the default models, shipped with the package (``bench/held_out_baselines.py``).
SHIPPED_BASELINES = Path(__file__).with_name("held_out_baselines.json")
_Z95 = 1.959964

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
#: The columns that depend only on the teacher and the untrained student (cached, shipped).
BASELINE_COLUMNS = ("before xx>en", "before en>xx", "before xx>T(en)", "teacher xx>en", "teacher en>xx")


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
    """Each distinct text of every language encoded once, in one call (sorted by length across
    languages, so batches pad little), then handed back per language."""
    distinct = list(dict.fromkeys([*en, *(t for texts in per_lang.values() for t in texts)]))
    vecs = encode(
        model, distinct, batch_size=batch_size, show_progress=len(distinct) > 1000, normalize=normalize
    )
    row = {t: i for i, t in enumerate(distinct)}

    def take(texts: Sequence[str]) -> np.ndarray:
        return vecs[[row[t] for t in texts]] if len(texts) else np.zeros((0, vecs.shape[1]), vecs.dtype)

    return take(en), {lang: take(texts) for lang, texts in per_lang.items()}


def baseline_columns(teacher: Vectors, before: Vectors) -> dict[str, dict[str, float]]:
    """Per language, the :data:`BASELINE_COLUMNS` from the teacher's and the untrained student's
    vectors."""
    (t_en, t_xx), (b_en, b_xx) = teacher, before
    return {
        lang: {
            "before xx>en": top1_accuracy(b_xx[lang], b_en),
            "before en>xx": top1_accuracy(b_en, b_xx[lang]),
            "before xx>T(en)": top1_accuracy(b_xx[lang], t_en),
            "teacher xx>en": top1_accuracy(t_xx[lang], t_en),
            "teacher en>xx": top1_accuracy(t_en, t_xx[lang]),
        }
        for lang in t_xx
    }


def table_rows(
    baselines: dict[str, dict[str, float]],
    teacher_en: np.ndarray,
    after: Vectors,
    shift: np.ndarray | None = None,
    sizes: dict[str, int] | None = None,
) -> list[dict[str, float | str]]:
    """The final table: a row per language, the ``mean`` row and the :data:`CI_ROW`. ``after``
    holds the trained model's raw vectors as exported; ``shift`` (the teacher mean the export added
    back, or None) is subtracted for the ``centred xx>T(en)`` column: the same weights queried in the
    mean-centred space against the teacher's raw English vectors. ``sizes``: verses per language
    (default: as many as ``teacher_en`` has)."""
    a_en, a_xx = after
    centre = 0.0 if shift is None else np.asarray(shift, dtype=np.float32)
    rows: list[dict[str, float | str]] = []
    for lang, base in baselines.items():
        row: dict[str, float | str] = {
            "lang": lang,
            "after xx>en": top1_accuracy(a_xx[lang], a_en),
            "after en>xx": top1_accuracy(a_en, a_xx[lang]),
            "after xx>T(en)": top1_accuracy(a_xx[lang], teacher_en),
            "centred xx>T(en)": top1_accuracy(a_xx[lang] - centre, teacher_en),
            **base,
        }
        rows.append({col: row[col] for col in COLUMNS})
    n = [int((sizes or {}).get(str(r["lang"]), len(teacher_en))) for r in rows]
    mean: dict[str, float | str] = {"lang": "mean"}
    ci: dict[str, float | str] = {"lang": CI_ROW}
    for col in COLUMNS[1:]:
        accs = [float(r[col]) for r in rows]
        mean[col] = float(np.mean(accs))
        ci[col] = mean_ci(accs, n)
    # rounded: cached and freshly encoded teacher vectors differ in the 8th digit
    mean[DROP_IN_COSINE] = round(float(np.mean(cosine_rowwise(a_en, teacher_en))), 4)
    return [*rows, mean, ci]


def mean_ci(accuracies: Sequence[float], sizes: Sequence[int]) -> float:
    """The 95% half-width (percentage points) of the mean of per-language top-1 accuracies (in %),
    each over ``sizes[i]`` verses: normal approximation of the binomial sampling error of the verses
    drawn, the languages fixed, ``1.96 * sqrt(sum p(1-p)/n) / L``."""
    p = np.asarray(accuracies, dtype=np.float64) / 100.0
    n = np.maximum(np.asarray(sizes, dtype=np.float64), 1.0)
    if not len(p):
        return 0.0
    return float(100.0 * _Z95 * np.sqrt(np.sum(p * (1.0 - p) / n)) / len(p))


def table_from_vectors(
    teacher: Vectors, before: Vectors, after: Vectors, shift: np.ndarray | None = None
) -> list[dict[str, float | str]]:
    """The final table from each model's (English vectors, {lang: vectors}) (:func:`table_rows`)."""
    sizes = {lang: len(v) for lang, v in teacher[1].items()}
    return table_rows(baseline_columns(teacher, before), teacher[0], after, shift, sizes)


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


def model_key(spec: str) -> str | None:
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

    key = model_key(spec)
    root = Path(cache_dir or default_cache()) / "held-out"

    def path_of(langs: dict[str, Sequence[str]]) -> Path:
        return root / f"{key}-{data_fingerprint(en, langs, max_seq_length, backend, quantize)}.npz"

    cached = _read_cached(path_of(per_lang), spec, en, per_lang) if key is not None else None
    if cached is not None:
        return cached
    model = load_backend_encoder(spec, backend, quantize, max_seq_length=max_seq_length)
    vecs = _vectors(model, en, per_lang, batch_size)
    logger.info("held-out table: encoded %d texts with %s", len(en) + sum(map(len, per_lang.values())), spec)
    if key is not None:
        _write_cached(path_of(per_lang), vecs)
        if per_lang:  # the English side alone too: what a run whose scores are cached still needs
            _write_cached(path_of({}), (vecs[0], {}))
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path, "wb") as fh:
            np.savez(fh, en=vecs[0], **{f"xx_{lang}": v for lang, v in vecs[1].items()})
    except OSError as exc:
        logger.warning("held-out table: cannot cache vectors in %s (%s)", path.parent, exc.strerror or exc)


def baseline_scores(
    cfg: Any, en: Sequence[str], per_lang: dict[str, Sequence[str]], **common: Any
) -> tuple[dict[str, dict[str, float]], np.ndarray]:
    """Per language the :data:`BASELINE_COLUMNS`, and the teacher's English vectors (the trained
    model's ``xx>T(en)`` columns query them). The scores come from the package
    (:data:`SHIPPED_BASELINES`) or the cache when both models are local folders whose content
    hashes, the texts and the settings match; else from the models' (cached) vectors."""
    before_spec = cfg.student if cfg.student != "teacher" else cfg.teacher
    t_key, s_key, fp = scores_key(cfg.teacher, before_spec, en, per_lang, **common)
    keys = (t_key, s_key)
    path = (
        Path(common.get("cache_dir") or _default_cache()) / "held-out" / f"scores-{t_key}-{s_key}-{fp}.json"
    )
    scores = None
    if None not in keys:
        scores = _shipped_scores(keys, fp, per_lang) or _read_scores(path, per_lang)
    if scores is not None:
        teacher_en, _ = baseline_vectors(cfg.teacher, en, {}, **common)
        return scores, teacher_en
    teacher = baseline_vectors(cfg.teacher, en, per_lang, **common)
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
    return model_key(teacher), model_key(student), data_fingerprint(en, per_lang, *settings)


def _default_cache() -> Path:
    from babelspace.resources import cache_dir

    return Path(cache_dir())


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
        write_json(path, record, indent=1)
    except OSError as exc:
        logger.warning("held-out table: cannot cache scores in %s (%s)", path.parent, exc.strerror or exc)


def held_out_table(
    cfg: Any,
    output: str | Path,
    backend: str = "torch",
    quantize: str = "none",
    shift: np.ndarray | None = None,
) -> list[dict[str, float | str]]:
    """The table that ends ``babelspace train``: ``cfg.test_sentences`` Bible test-book verses per
    language. The baseline columns come from :func:`baseline_scores` (shipped or cached); the trained
    model at ``output`` is encoded every run. ``shift``: the teacher mean its export added back."""
    from babelspace.models.backends import load_backend_encoder

    en, per_lang = held_out_texts(cfg.langs, cfg.test_sentences, cfg.seed)
    logger.info("held-out table: %d verses x %d languages", len(en), len(per_lang))
    common = {
        "max_seq_length": cfg.max_seq_length,
        "backend": backend,
        "quantize": quantize,
        "cache_dir": getattr(cfg, "cache_dir", None),
    }
    baselines, teacher_en = baseline_scores(cfg, en, per_lang, **common)
    after_model = load_backend_encoder(str(output), backend, quantize, max_seq_length=cfg.max_seq_length)
    after = _vectors(after_model, en, per_lang, 64, normalize=False)
    return table_rows(baselines, teacher_en, after, shift, {lang: len(t) for lang, t in per_lang.items()})
