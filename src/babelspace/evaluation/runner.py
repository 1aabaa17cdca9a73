"""Run evaluation tasks on one model: load data, encode every distinct text once, call the array-level
task functions, and collect every figure with its configuration.

This is the engine of ``babelspace eval`` (:mod:`babelspace.evaluation.cli` only parses arguments and
prints). It logs progress with :mod:`logging`; it never prints.

Data. With no ``data`` the default is the offline Bible's test books (:data:`babelspace.data.TEST_BOOKS`)
for every requested language, each aligned with the *same* English verses (one shared English pool).
``data`` takes corpus specs as :func:`babelspace.data.readers.load_parallel` does (``bible``, TSV files,
``SRC,TGT`` aligned files, Hugging Face dataset folders); pairs are grouped by their non-English
language. ``max_sentences`` keeps a seeded random subset (the same verses for every language of the
Bible). Task-specific sources (``tatoeba_dir``, ``bucc_dir``, ``xsimpp_files``, ``sts_files``) replace
the default data of their task.

Efficiency. Vectors are cached per model in a dict keyed by text (:class:`EmbeddingCache`): the English
pool shared by all languages and tasks is encoded once, and so is every other distinct text. Vectors are
kept raw (as the model outputs them); the cosine-based tasks normalise them, the MSE task uses them raw.
Every neighbour search goes through the chunked functions of :mod:`babelspace.evaluation.knn`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.errors import BabelspaceError, ResourceError
from babelspace.evaluation.bucc import (
    BuccSplit,
    BuccTask,
    apply_threshold,
    bucc_eval_candidates,
    build_bucc_task,
    mine_candidates,
    read_bucc,
    tune_threshold,
)
from babelspace.evaluation.knn import Margin, l2_normalize
from babelspace.evaluation.mse import mse_to_teacher
from babelspace.evaluation.sts import StsData, language_bias, read_sts17, read_stsb, sts_spearman
from babelspace.evaluation.tasks import ALL_TASKS, TASKS, parse_tasks, tatoeba_code, two_letter
from babelspace.evaluation.tatoeba import read_tatoeba_dir, tatoeba_accuracy
from babelspace.evaluation.xsim import XsimResult, xsim_errors, xsim_multi
from babelspace.evaluation.xsimpp import (
    NEGATIVE_TYPES,
    OTHER,
    HardNegative,
    generate_hard_negatives,
    read_xsimpp_files,
    xsimpp_errors,
)

logger = logging.getLogger(__name__)

__all__ = [
    "BUCC_DISTRACTOR_EXCLUDED_BOOKS",
    "EmbeddingCache",
    "EvalConfig",
    "EvalData",
    "EvalReport",
    "EvalRunner",
    "LangPairs",
    "TaskResult",
    "load_eval_data",
    "run_eval",
    "subsample_indices",
]

#: Books never used as BUCC distractors: Matthew (40) and Luke (42) retell most of Mark (41, a test
#: book), so their verses could be near-translations of gold verses.
BUCC_DISTRACTOR_EXCLUDED_BOOKS: tuple[int, ...] = (40, 42)

PCA_VERSES = 200
PCA_LANGS = 8


# --------------------------------------------------------------------------- configuration


@dataclass
class EvalConfig:
    """Everything a run depends on (saved in the JSON report)."""

    model: str
    tasks: list[str] = field(default_factory=lambda: list(ALL_TASKS))
    data: list[str] | None = None
    langs: list[str] | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    teacher: str = "minilm"
    margin: str = "ratio"
    k: int = 4
    direction: str = "xx2en"
    max_sentences: int | None = None
    seed: int = 0
    batch_size: int = 64
    max_seq_length: int | None = None
    device: str | None = None
    backend: str = "torch"
    quantize: str = "none"
    xsimpp_files: tuple[str, str] | None = None
    tatoeba_dir: str | None = None
    bucc_dir: str | None = None
    bucc_ratio: float = 4.0
    sts_files: list[str] = field(default_factory=list)
    plots_dir: str | None = None
    progress: bool = False

    def validate(self) -> None:
        self.tasks = parse_tasks(self.tasks)
        try:
            self.margin = Margin(self.margin).value
        except ValueError:
            raise BabelspaceError(
                f"unknown margin {self.margin!r}; use one of {', '.join(m.value for m in Margin)}"
            ) from None
        if self.direction not in ("xx2en", "both"):
            raise BabelspaceError(f"unknown direction {self.direction!r}; use 'xx2en' or 'both'")
        if self.k < 1:
            raise BabelspaceError(f"--k must be >= 1, got {self.k}")
        if self.max_sentences is not None and self.max_sentences < 2:
            raise BabelspaceError(f"--max-sentences must be >= 2, got {self.max_sentences}")
        if self.batch_size < 1:
            raise BabelspaceError(f"--batch-size must be >= 1, got {self.batch_size}")
        from babelspace.backends import validate_backend

        validate_backend(self.backend, self.quantize)
        if self.bucc_ratio < 0:
            raise BabelspaceError(f"--bucc-ratio must be >= 0, got {self.bucc_ratio}")
        for name, value in (("--tatoeba-dir", self.tatoeba_dir), ("--bucc-dir", self.bucc_dir)):
            if value is not None and not Path(value).is_dir():
                raise ResourceError(f"{name} {value}: not a directory")
        for f in [*self.sts_files, *(self.xsimpp_files or ())]:
            if not Path(f).is_file():
                raise ResourceError(f"file not found: {f}")
        if self.langs is not None:
            self.langs = [lang.strip().lower() for lang in self.langs if lang.strip()]


# --------------------------------------------------------------------------- results


@dataclass
class TaskResult:
    """One task's figures. ``per_language`` maps a row label (language, or STS set) to its figures;
    ``average`` holds the combined figures (micro-average for error rates, mean otherwise)."""

    task: str
    status: str = "ok"
    reason: str | None = None
    metric: str = ""
    unit: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    per_language: dict[str, dict[str, Any]] = field(default_factory=dict)
    average: dict[str, Any] = field(default_factory=dict)
    n_sentences: int = 0
    wall_time_s: float = 0.0
    encode_time_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def main_values(self) -> dict[str, float]:
        """``{row: main metric}`` for the rows that have it."""
        return {
            row: float(v[self.metric])
            for row, v in self.per_language.items()
            if v.get(self.metric) is not None and row != "en"
        }


@dataclass
class EvalReport:
    model: str
    config: dict[str, Any]
    data: dict[str, Any]
    tasks: dict[str, TaskResult]
    encoding: dict[str, Any]
    wall_time_s: float
    plots: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- encoding cache


class EmbeddingCache:
    """Raw vectors of one model, keyed by text: each distinct text is encoded once per run."""

    def __init__(self, model: Any, name: str, *, batch_size: int = 64, progress: bool = False) -> None:
        self.model = model
        self.name = name
        self.batch_size = batch_size
        self.progress = progress
        self._vecs: dict[str, np.ndarray] = {}
        self.seconds = 0.0
        self.n_encoded = 0
        self.n_requested = 0
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            from babelspace.encoder import embedding_dim

            self._dim = embedding_dim(self.model)
        return self._dim

    def __contains__(self, text: str) -> bool:
        return text in self._vecs

    def __len__(self) -> int:
        return len(self._vecs)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 [len(texts), dim] raw vectors; texts not seen before are encoded in one batch."""
        from babelspace.encoder import encode

        self.n_requested += len(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._vecs]
        if missing:
            t0 = time.perf_counter()
            logger.info("%s: encoding %d new texts (%d cached)", self.name, len(missing), len(self._vecs))
            vecs = encode(
                self.model,
                missing,
                batch_size=self.batch_size,
                show_progress=self.progress and len(missing) >= 256,
                normalize=False,
            )
            for text, vec in zip(missing, vecs, strict=True):
                self._vecs[text] = vec
            self._dim = int(vecs.shape[1])
            self.n_encoded += len(missing)
            self.seconds += time.perf_counter() - t0
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vecs[t] for t in texts]).astype(np.float32, copy=False)

    def stats(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "texts_encoded": self.n_encoded,
            "texts_requested": self.n_requested,
            "encode_time_s": round(self.seconds, 3),
        }


# --------------------------------------------------------------------------- data


@dataclass
class LangPairs:
    """Aligned sentences of one language with its pivot (English): ``xx[i]`` translates ``en[i]``.
    Texts are unique within each list."""

    lang: str
    en: list[str]
    xx: list[str]

    def __len__(self) -> int:
        return len(self.en)


@dataclass
class EvalData:
    """The evaluation pairs, grouped by language."""

    name: str
    groups: dict[str, LangPairs]
    bible: bool = False
    description: str = ""

    def english_pool(self) -> list[str]:
        """Every distinct English text of every language, in first-seen order."""
        return list(dict.fromkeys(t for g in self.groups.values() for t in g.en))

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "languages": list(self.groups),
            "pairs_per_language": {lang: len(g) for lang, g in self.groups.items()},
            "english_pool": len(self.english_pool()),
            "shared_english_pool": self.bible,
        }


def subsample_indices(n: int, max_n: int | None, seed: int) -> np.ndarray:
    """Sorted seeded random subset of ``range(n)`` of size ``max_n`` (all of it when ``n <= max_n``)."""
    if max_n is None or n <= max_n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, max_n, replace=False))


def _bible_groups(langs: Sequence[str] | None, max_sentences: int | None, seed: int) -> dict[str, LangPairs]:
    from babelspace.data.bible import bible_parallel_texts

    try:
        en, per_lang = bible_parallel_texts(langs, "test") if langs else bible_parallel_texts(None, "test")
    except ValueError as e:  # e.g. --langs en
        raise BabelspaceError(f"Bible evaluation data: {e}") from e
    idx = subsample_indices(len(en), max_sentences, seed)
    en_sub = [en[i] for i in idx]
    return {lang: LangPairs(lang, en_sub, [texts[i] for i in idx]) for lang, texts in per_lang.items()}


def _corpus_groups(corpus: Any) -> dict[str, LangPairs]:
    groups: dict[str, LangPairs] = {}
    seen: dict[str, tuple[set[str], set[str]]] = {}
    for p in corpus:
        if p.src_lang == "en":
            lang, en, xx = p.tgt_lang, p.src, p.tgt
        elif p.tgt_lang == "en":
            lang, en, xx = p.src_lang, p.tgt, p.src
        else:  # no English side: the source plays the pivot
            lang, en, xx = f"{p.src_lang}-{p.tgt_lang}", p.src, p.tgt
        group = groups.setdefault(lang, LangPairs(lang, [], []))
        seen_en, seen_xx = seen.setdefault(lang, (set(), set()))
        if en in seen_en or xx in seen_xx:
            continue  # retrieval needs unique targets
        seen_en.add(en)
        seen_xx.add(xx)
        group.en.append(en)
        group.xx.append(xx)
    return groups


def load_eval_data(cfg: EvalConfig) -> EvalData:
    """The default evaluation pairs: Bible test books, or the corpora of ``cfg.data``."""
    specs = cfg.data or ["bible"]
    if specs == ["bible"]:
        groups = _bible_groups(cfg.langs, cfg.max_sentences, cfg.seed)
        n = len(next(iter(groups.values())))
        desc = (
            f"offline Bible, test books, {n} verses per language"
            + (f" (seeded subset, seed {cfg.seed})" if cfg.max_sentences else "")
            + ", one English pool shared by every language"
        )
        return EvalData("bible-test", groups, bible=True, description=desc)

    from babelspace.data.readers import load_parallel

    merged: dict[str, LangPairs] = {}
    for spec in specs:
        if spec == "bible":
            part = _bible_groups(cfg.langs, None, cfg.seed)
        else:
            corpus = load_parallel(
                spec, langs=cfg.langs, split="test", src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang
            )
            part = _corpus_groups(corpus)
        for lang, g in part.items():
            m = merged.setdefault(lang, LangPairs(lang, [], []))
            m.en.extend(g.en)
            m.xx.extend(g.xx)
    groups = {}
    for lang, g in merged.items():
        # dedupe again across specs, then subsample
        keep_en: set[str] = set()
        keep_xx: set[str] = set()
        en, xx = [], []
        for e, x in zip(g.en, g.xx, strict=True):
            if e in keep_en or x in keep_xx:
                continue
            keep_en.add(e)
            keep_xx.add(x)
            en.append(e)
            xx.append(x)
        idx = subsample_indices(len(en), cfg.max_sentences, cfg.seed)
        if len(idx) < 2:
            logger.warning("%s: only %d pair(s) in the evaluation data; language dropped", lang, len(idx))
            continue
        groups[lang] = LangPairs(lang, [en[i] for i in idx], [xx[i] for i in idx])
    if not groups:
        raise ResourceError(
            f"no evaluation pairs in {specs}" + (f" for languages {cfg.langs}" if cfg.langs else "")
        )
    desc = "user data: " + ", ".join(specs)
    if cfg.max_sentences:
        desc += f" (at most {cfg.max_sentences} pairs per language, seed {cfg.seed})"
    return EvalData(",".join(specs), dict(sorted(groups.items())), bible=False, description=desc)


# --------------------------------------------------------------------------- runner


def _xsim_dict(r: XsimResult, prefix: str = "") -> dict[str, Any]:
    return {f"{prefix}error_rate": r.error_rate, f"{prefix}errors": r.errors, f"{prefix}n": r.n}


def _sts_reader(path: Path) -> StsData:
    with path.open(encoding="utf-8") as f:
        first = next((line for line in f if line.strip()), "")
    n_fields = len(first.rstrip("\r\n").split("\t"))
    if n_fields == 3:
        return read_sts17(path)
    return read_stsb(path)


class EvalRunner:
    """Runs the configured tasks on one model. ``run()`` returns an :class:`EvalReport`."""

    def __init__(self, cfg: EvalConfig, model: Any | None = None) -> None:
        cfg.validate()
        self.cfg = cfg
        self._model = model
        self._cache: EmbeddingCache | None = None
        self._teacher_cache: EmbeddingCache | None = None
        self._data: EvalData | None = None
        self._sts_sets: dict[str, StsData] | None = None

    # ---- lazily loaded resources
    @property
    def cache(self) -> EmbeddingCache:
        if self._cache is None:
            if self._model is None:
                from babelspace.backends import load_backend_encoder

                logger.info("loading model %s (%s, %s)", self.cfg.model, self.cfg.backend, self.cfg.quantize)
                self._model = load_backend_encoder(
                    self.cfg.model,
                    self.cfg.backend,
                    self.cfg.quantize,
                    device=self.cfg.device,
                    max_seq_length=self.cfg.max_seq_length,
                )
            self._cache = EmbeddingCache(
                self._model, self.cfg.model, batch_size=self.cfg.batch_size, progress=self.cfg.progress
            )
        return self._cache

    @property
    def teacher_cache(self) -> EmbeddingCache:
        if self._teacher_cache is None:
            if self.cfg.teacher == self.cfg.model:
                self._teacher_cache = self.cache
            else:
                from babelspace.encoder import load_encoder

                logger.info("loading teacher %s", self.cfg.teacher)
                teacher = load_encoder(
                    self.cfg.teacher, device=self.cfg.device, max_seq_length=self.cfg.max_seq_length
                )
                self._teacher_cache = EmbeddingCache(
                    teacher, self.cfg.teacher, batch_size=self.cfg.batch_size, progress=self.cfg.progress
                )
        return self._teacher_cache

    @property
    def data(self) -> EvalData:
        if self._data is None:
            self._data = load_eval_data(self.cfg)
            logger.info("evaluation data: %s", self._data.description)
        return self._data

    def _encode_groups(self, groups: Sequence[LangPairs]) -> None:
        """Encode every text of ``groups`` in one call (so one progress bar and full batches)."""
        texts: list[str] = []
        for g in groups:
            texts.extend(g.en)
            texts.extend(g.xx)
        self.cache.encode(texts)

    def _base_config(self) -> dict[str, Any]:
        return {"model": self.cfg.model, "margin": self.cfg.margin, "k": self.cfg.k}

    # ---- tasks
    def task_xsim(self) -> TaskResult:
        cfg, data = self.cfg, self.data
        res = TaskResult(
            "xsim", config={**self._base_config(), "direction": cfg.direction, "data": data.description}
        )
        self._encode_groups(list(data.groups.values()))
        fwd: dict[str, XsimResult] = {}
        bwd: dict[str, XsimResult] = {}
        for lang, g in data.groups.items():
            xx, en = self.cache.encode(g.xx), self.cache.encode(g.en)
            fwd[lang] = xsim_errors(xx, en, margin=cfg.margin, k=cfg.k, src_texts=g.xx, tgt_texts=g.en)
            row = _xsim_dict(fwd[lang])
            if cfg.direction == "both":
                bwd[lang] = xsim_errors(en, xx, margin=cfg.margin, k=cfg.k, src_texts=g.en, tgt_texts=g.xx)
                row.update(_xsim_dict(bwd[lang], "en2xx_"))
                row["both_error_rate"] = 100.0 * (fwd[lang].errors + bwd[lang].errors) / (2 * fwd[lang].n)
            res.per_language[lang] = row
            logger.info("xsim %s: %.2f%% (%d/%d)", lang, fwd[lang].error_rate, fwd[lang].errors, fwd[lang].n)
        res.average = {**_xsim_dict(xsim_multi(fwd)), "average": "micro"}
        if bwd:
            total_b = xsim_multi(bwd)
            res.average.update(_xsim_dict(total_b, "en2xx_"))
            n_all = res.average["n"] + total_b.n
            res.average["both_error_rate"] = 100.0 * (res.average["errors"] + total_b.errors) / n_all
        res.n_sentences = sum(len(g) for g in data.groups.values())
        return res

    def _xsimpp_negatives(
        self, g: LangPairs, memo: dict[tuple[str, ...], list[HardNegative]]
    ) -> tuple[list[str], list[str], list[HardNegative]]:
        """(sources, targets, negatives) of one language with generated negatives (memoised per pool)."""
        key = tuple(g.en)
        if key not in memo:
            memo[key] = generate_hard_negatives(g.en, seed=self.cfg.seed)
        return g.xx, g.en, memo[key]

    def _xsimpp_from_files(
        self, g: LangPairs, targets: list[str], negatives: list[HardNegative]
    ) -> tuple[list[str], list[str], list[HardNegative], int]:
        """Keep the released targets that have a translation in ``g``; remap their negatives."""
        en2xx = dict(zip(g.en, g.xx, strict=True))
        keep = [i for i, t in enumerate(targets) if t in en2xx]
        new_index = {old: new for new, old in enumerate(keep)}
        tgt = [targets[i] for i in keep]
        src = [en2xx[t] for t in tgt]
        negs = [
            HardNegative(n.text, new_index[n.source_index], n.type)
            for n in negatives
            if n.source_index in new_index
        ]
        return src, tgt, negs, len(targets) - len(keep)

    def task_xsimpp(self) -> TaskResult:
        cfg, data = self.cfg, self.data
        res = TaskResult("xsimpp", config={**self._base_config(), "data": data.description})
        files = None
        if cfg.xsimpp_files:
            files = read_xsimpp_files(*cfg.xsimpp_files)
            res.config["negatives"] = f"released files {cfg.xsimpp_files[0]} + {cfg.xsimpp_files[1]}"
        else:
            res.config["negatives"] = (
                f"generated by babelspace's rule-based re-creation (seed {cfg.seed}; not LASER's files)"
            )
        self._encode_groups(list(data.groups.values()))
        memo: dict[tuple[str, ...], list[HardNegative]] = {}
        per_type_total: dict[str, int] = {}
        errors = n = 0
        n_neg: dict[str, int] = {}
        for lang, g in data.groups.items():
            dropped = 0
            if files is not None:
                src, tgt, negs, dropped = self._xsimpp_from_files(g, files.targets, files.negatives)
                if not tgt:
                    res.notes.append(f"{lang}: no released target has a translation in the data; skipped")
                    continue
            else:
                src, tgt, negs = self._xsimpp_negatives(g, memo)
            neg_texts = [x.text for x in negs]
            self.cache.encode(neg_texts)
            r = xsimpp_errors(
                self.cache.encode(src),
                self.cache.encode(tgt),
                self.cache.encode(neg_texts),
                [x.source_index for x in negs],
                [x.type for x in negs],
                margin=cfg.margin,
                k=cfg.k,
                tgt_texts=tgt,
            )
            counts = {t: sum(1 for x in negs if x.type == t) for t in dict.fromkeys(x.type for x in negs)}
            res.per_language[lang] = {
                "error_rate": r.error_rate,
                "errors": r.errors,
                "n": r.n,
                "errors_by_type": r.errors_by_type,
                "error_rate_by_type": r.error_rate_by_type,
                "negatives": len(negs),
                "negatives_by_type": counts,
            }
            if dropped:
                res.per_language[lang]["targets_without_translation"] = dropped
                res.notes.append(
                    f"{lang}: {dropped} released targets have no translation in the data; left out"
                )
            for t, c in r.errors_by_type.items():
                per_type_total[t] = per_type_total.get(t, 0) + c
            for t, c in counts.items():
                n_neg[t] = n_neg.get(t, 0) + c
            errors += r.errors
            n += r.n
            logger.info(
                "xsim++ %s: %.2f%% (%d/%d, %d negatives)", lang, r.error_rate, r.errors, r.n, len(negs)
            )
        if n == 0:
            res.status, res.reason = "skipped", "no language had sources for the xsim++ targets"
            return res
        res.average = {
            "error_rate": 100.0 * errors / n,
            "errors": errors,
            "n": n,
            "errors_by_type": per_type_total,
            "error_rate_by_type": {t: 100.0 * c / n for t, c in per_type_total.items()},
            "average": "micro",
        }
        res.config["negative_types"] = sorted(set(NEGATIVE_TYPES) | set(n_neg) | {OTHER})
        res.n_sentences = n
        return res

    def task_tatoeba(self) -> TaskResult:
        cfg = self.cfg
        if cfg.tatoeba_dir:
            langs = [tatoeba_code(lang) for lang in cfg.langs] if cfg.langs else None
            pairs = read_tatoeba_dir(cfg.tatoeba_dir, langs)
            groups: dict[str, LangPairs] = {}
            for code, p in pairs.items():
                idx = subsample_indices(len(p.en), cfg.max_sentences, cfg.seed)
                label = two_letter(code)
                groups[label] = LangPairs(label, [p.en[i] for i in idx], [p.xx[i] for i in idx])
            desc = f"LASER Tatoeba folder {cfg.tatoeba_dir}"
            if cfg.max_sentences:
                desc += f" (at most {cfg.max_sentences} pairs per language, seed {cfg.seed})"
        else:
            groups, desc = self.data.groups, self.data.description
        res = TaskResult("tatoeba", config={"model": cfg.model, "similarity": "cosine top-1", "data": desc})
        self._encode_groups(list(groups.values()))
        for lang, g in groups.items():
            r = tatoeba_accuracy(self.cache.encode(g.xx), self.cache.encode(g.en))
            res.per_language[lang] = {
                "mean_accuracy": r.mean,
                "xx2en_accuracy": r.xx_to_en,
                "en2xx_accuracy": r.en_to_xx,
                "n": len(g),
            }
            logger.info("tatoeba %s: %.2f%% (xx->en %.2f, en->xx %.2f)", lang, r.mean, r.xx_to_en, r.en_to_xx)
        rows = list(res.per_language.values())
        res.average = {
            key: float(np.mean([r[key] for r in rows]))
            for key in ("mean_accuracy", "xx2en_accuracy", "en2xx_accuracy")
        } | {"average": "macro"}
        res.n_sentences = sum(len(g) for g in groups.values())
        return res

    def _bucc_tasks_from_data(self) -> tuple[dict[str, BuccTask], str]:
        cfg, data = self.cfg, self.data
        tasks: dict[str, BuccTask] = {}
        if data.bible:
            from babelspace.data.bible import bible_parallel_texts, bible_verses

            langs = list(data.groups)
            en_train, xx_train = bible_parallel_texts(langs, "train")
            excluded = {
                t
                for (book, _, _), t in bible_verses("en", "train").items()
                if book in BUCC_DISTRACTOR_EXCLUDED_BOOKS
            }
            keep = [i for i, t in enumerate(en_train) if t not in excluded]
            d_en = [en_train[i] for i in keep]
            for lang, g in data.groups.items():
                d_xx = [xx_train[lang][i] for i in keep]
                tasks[lang] = build_bucc_task(
                    g.xx, g.en, d_xx, d_en, ratio=cfg.bucc_ratio, seed=cfg.seed,
                    src_lang=lang, tgt_lang="en", distractors_parallel=True,
                )  # fmt: skip
            desc = (
                f"BUCC-style task from the Bible: the {len(next(iter(data.groups.values())))} evaluated test "
                f"verses per language, split in halves (training/test, seed {cfg.seed}), each hidden among "
                f"{cfg.bucc_ratio:g}x as many unrelated train-book verses per side (distractor sides drawn from "
                "disjoint verses, so no distractor translates another; Matthew and Luke excluded)"
            )
        else:
            for lang, g in data.groups.items():
                # n = gold + 2 * ratio * gold distractor positions (halves per side)
                n_gold = max(2, int(len(g) / (1 + 2 * cfg.bucc_ratio)))
                if n_gold >= len(g):
                    logger.warning("bucc %s: too few pairs (%d) to hide gold pairs; skipped", lang, len(g))
                    continue
                rng = np.random.default_rng(cfg.seed)
                order = rng.permutation(len(g))
                gold, rest = order[:n_gold], order[n_gold:]
                tasks[lang] = build_bucc_task(
                    [g.xx[i] for i in gold], [g.en[i] for i in gold],
                    [g.xx[i] for i in rest], [g.en[i] for i in rest],
                    ratio=cfg.bucc_ratio, seed=cfg.seed, src_lang=lang, tgt_lang="en",
                    distractors_parallel=True,
                )  # fmt: skip
            desc = (
                f"BUCC-style task from {data.name}: 1/(1+2*{cfg.bucc_ratio:g}) of each language's pairs are gold "
                "(split in halves training/test), the others are distractors (sides from disjoint pairs)"
            )
        return tasks, desc

    def _bucc_tasks_from_dir(self) -> tuple[dict[str, BuccTask], str]:
        cfg = self.cfg
        directory = Path(cfg.bucc_dir)  # type: ignore[arg-type]
        if cfg.langs:
            langs = list(cfg.langs)
        else:
            found = {p.name.split("-")[0] for p in directory.rglob("*-en.training.*")}
            langs = sorted(found)
            if not langs:
                raise ResourceError(f"{directory}: no BUCC files named xx-en.training.xx found")
        tasks = {}
        for lang in langs:
            train = read_bucc(directory, lang, "training")
            test = read_bucc(directory, lang, "test", require_gold=False)
            tasks[lang] = BuccTask(train, test)
        return tasks, f"BUCC 2018 layout in {directory}"

    def task_bucc(self) -> TaskResult:
        cfg = self.cfg
        tasks, desc = self._bucc_tasks_from_dir() if cfg.bucc_dir else self._bucc_tasks_from_data()
        res = TaskResult(
            "bucc",
            config={
                **self._base_config(),
                "candidates": "forward + backward, greedy one-to-one",
                "threshold": "tuned on the training split, applied to test",
                "data": desc,
            },
        )
        if not cfg.bucc_dir:
            res.config["distractor_ratio"] = cfg.bucc_ratio
        splits: list[BuccSplit] = [s for t in tasks.values() for s in (t.training, t.test)]
        self.cache.encode([x for s in splits for x in (*s.src_texts, *s.tgt_texts)])
        n_total = 0
        for lang, task in tasks.items():
            enc = {
                name: (self.cache.encode(s.src_texts), self.cache.encode(s.tgt_texts))
                for name, s in (("training", task.training), ("test", task.test))
            }
            train_c = mine_candidates(*enc["training"], cfg.k, cfg.margin)
            test_c = mine_candidates(*enc["test"], cfg.k, cfg.margin)
            sizes = {
                "training_sentences": [len(task.training.src_texts), len(task.training.tgt_texts)],
                "test_sentences": [len(task.test.src_texts), len(task.test.tgt_texts)],
                "training_gold": len(task.training.gold or []),
            }
            if task.test.gold is not None:
                r = bucc_eval_candidates(
                    train_c, task.training.gold_indices(), test_c, task.test.gold_indices()
                )
                row = {
                    "f1": r.f1,
                    "precision": r.precision,
                    "recall": r.recall,
                    "threshold": r.threshold,
                    "train_f1": r.train_f1,
                    "test_gold": len(task.test.gold),
                }
            else:
                t, _, _, train_f1 = tune_threshold(train_c, task.training.gold_indices())
                row = {
                    "f1": None,
                    "precision": None,
                    "recall": None,
                    "threshold": t,
                    "train_f1": train_f1,
                    "test_pairs_above_threshold": len(apply_threshold(test_c, t)),
                }
                res.notes.append(
                    f"{lang}: no test gold file; test F1 cannot be computed (train_f1 is tuned on the same "
                    "data: optimistic)"
                )
            res.per_language[lang] = row | sizes
            n_total += sum(sizes["training_sentences"]) + sum(sizes["test_sentences"])
            logger.info("bucc %s: F1 %s (train F1 %.2f)", lang, row["f1"], row["train_f1"])
        scored = [r for r in res.per_language.values() if r["f1"] is not None]
        if scored:
            res.average = {
                key: float(np.mean([r[key] for r in scored]))
                for key in ("f1", "precision", "recall", "train_f1")
            } | {"average": "macro"}
        else:
            res.average = {
                "f1": None,
                "train_f1": float(np.mean([r["train_f1"] for r in res.per_language.values()])),
            }
        res.n_sentences = n_total
        return res

    def _sts(self) -> dict[str, StsData]:
        if self._sts_sets is None:
            sets: dict[str, StsData] = {}
            for f in self.cfg.sts_files:
                d = _sts_reader(Path(f))
                key = f"{d.lang1}-{d.lang2}"
                if key in sets:
                    key = f"{key} ({d.name})"
                sets[key] = d
            self._sts_sets = sets
        return self._sts_sets

    def task_sts(self) -> TaskResult:
        res = TaskResult(
            "sts", config={"model": self.cfg.model, "similarity": "cosine", "score": "Spearman x 100"}
        )
        if not self.cfg.sts_files:
            res.status = "skipped"
            res.reason = (
                "no STS files given (--sts FILE ...); there is no offline STS data, so no number is reported"
            )
            return res
        sets = self._sts()
        self.cache.encode([t for d in sets.values() for t in (*d.s1, *d.s2)])
        for key, d in sets.items():
            rho = sts_spearman(self.cache.encode(d.s1), self.cache.encode(d.s2), d.scores)
            res.per_language[key] = {"spearman": rho, "n": len(d), "file": d.name}
            logger.info("sts %s: %.2f", key, rho)
        res.average = {
            "spearman": float(np.mean([r["spearman"] for r in res.per_language.values()])),
            "average": "macro",
        }
        res.config["files"] = list(self.cfg.sts_files)
        res.n_sentences = sum(len(d) for d in sets.values())
        return res

    def task_bias(self) -> TaskResult:
        res = TaskResult("bias", config={"model": self.cfg.model, "files": list(self.cfg.sts_files)})
        if len(self.cfg.sts_files) < 2:
            res.status = "skipped"
            res.reason = (
                f"language bias needs at least 2 STS files (--sts), got {len(self.cfg.sts_files)}; "
                "there is no offline STS data"
            )
            return res
        sets = self._sts()
        self.cache.encode([t for d in sets.values() for t in (*d.s1, *d.s2)])
        r = language_bias(
            {k: (self.cache.encode(d.s1), self.cache.encode(d.s2), d.scores) for k, d in sets.items()}
        )
        res.per_language = {k: {"spearman": v, "n": len(sets[k])} for k, v in r.per_set.items()}
        res.average = {"drop": r.drop, "joined": r.joined, "mean_per_set": r.mean_per_set}
        res.n_sentences = sum(len(d) for d in sets.values())
        return res

    def task_mse(self) -> TaskResult:
        cfg, data = self.cfg, self.data
        res = TaskResult(
            "mse",
            config={
                "model": cfg.model,
                "teacher": cfg.teacher,
                "vectors": "raw (as the models output them)",
                "pairs": "student(translation) and student(English) vs teacher(English)",
                "data": data.description,
            },
        )
        self._encode_groups(list(data.groups.values()))
        en_pool = data.english_pool()
        teacher = self.teacher_cache
        t_en = teacher.encode(en_pool)
        if t_en.shape[1] != self.cache.dim:
            res.status = "skipped"
            res.reason = f"student dimension {self.cache.dim} differs from teacher dimension {t_en.shape[1]}"
            return res
        t_of = dict(zip(en_pool, t_en, strict=True))
        for lang, g in data.groups.items():
            t = np.stack([t_of[e] for e in g.en])
            r = mse_to_teacher(self.cache.encode(g.xx), t)
            res.per_language[lang] = {
                "elementwise_mse_x100": r.elementwise_mse_x100,
                "mean_squared_l2": r.mean_squared_l2,
                "n": r.n,
            }
        r_en = mse_to_teacher(self.cache.encode(en_pool), t_en)
        res.per_language["en"] = {
            "elementwise_mse_x100": r_en.elementwise_mse_x100,
            "mean_squared_l2": r_en.mean_squared_l2,
            "n": r_en.n,
        }
        rows = [v for k, v in res.per_language.items() if k != "en"]
        res.average = {
            "elementwise_mse_x100": float(np.mean([r["elementwise_mse_x100"] for r in rows])),
            "mean_squared_l2": float(np.mean([r["mean_squared_l2"] for r in rows])),
            "average": "macro over translations (the 'en' row, student vs teacher on English, is apart)",
            "dim": r_en.dim,
        }
        res.n_sentences = sum(len(g) for g in data.groups.values())
        return res

    def task_geometry(self) -> TaskResult:
        from babelspace.evaluation.geometry import geometry

        data = self.data
        res = TaskResult(
            "geometry",
            config={
                **self._base_config(),
                "vectors": "L2-normalised",
                "hubness_k": 10,
                "language_share": "between-language variance of the language means / total variance",
                "data": data.description,
            },
        )
        self._encode_groups(list(data.groups.values()))
        vectors = {"en": self.cache.encode(data.english_pool())}
        vectors |= {lang: self.cache.encode(g.xx) for lang, g in data.groups.items()}
        g = geometry(vectors, k=10)
        res.per_language = g.per_language
        rows = list(g.per_language.values())
        res.average = {
            key: float(np.mean([r[key] for r in rows if r[key] is not None]))
            for key in ("effective_rank", "anisotropy", "hubness_skew")
            if any(r[key] is not None for r in rows)
        } | {"language_share": g.language_share, "pooled": g.pooled, "average": "macro over languages"}
        self._geometry_spectra = g.spectra
        res.n_sentences = sum(len(v) for v in vectors.values())
        return res

    # ---- plots
    def write_plots(self, report_tasks: dict[str, TaskResult], out_dir: Path) -> list[str]:
        from babelspace.evaluation.plots import plot_language_bars, plot_pca_languages

        written: list[str] = []
        for name, r in report_tasks.items():
            values = r.main_values()
            if r.status != "ok" or not values:
                continue
            spec = TASKS[name]
            arrow = "higher is better" if spec.higher_is_better else "lower is better"
            path = plot_language_bars(
                values,
                out_dir / f"{name}.png",
                title=f"{name} ({arrow})",
                ylabel=f"{spec.metric} ({spec.unit})",
            )
            written.append(str(path))
        spectra = getattr(self, "_geometry_spectra", None)
        if spectra:
            from babelspace.evaluation.geometry import plot_spectra

            path = plot_spectra(
                spectra, out_dir / "geometry_spectra.png", title=f"{self.cfg.model}: variance spectrum"
            )
            written.append(str(path))
        if any(t in self.cfg.tasks for t in ("xsim", "xsimpp", "tatoeba", "bucc", "mse")):
            data = self.data
            langs = list(data.groups)[: PCA_LANGS - 1]
            vecs, labels = [], []
            first = data.groups[langs[0]]
            idx = subsample_indices(len(first), PCA_VERSES, self.cfg.seed)
            vecs.append(self.cache.encode([first.en[i] for i in idx]))
            labels += ["en"] * len(idx)
            for lang in langs:
                g = data.groups[lang]
                sel = subsample_indices(len(g), PCA_VERSES, self.cfg.seed)
                vecs.append(self.cache.encode([g.xx[i] for i in sel]))
                labels += [lang] * len(sel)
            path = plot_pca_languages(
                l2_normalize(np.concatenate(vecs)),
                labels,
                out_dir / "pca_languages.png",
                title=f"{self.cfg.model}: sentence vectors (PCA, {len(idx)} sentences x {len(langs) + 1} languages)",
            )
            written.append(str(path))
        return written

    # ---- main
    def run(self) -> EvalReport:
        t_start = time.perf_counter()
        runners: dict[str, Callable[[], TaskResult]] = {
            "xsim": self.task_xsim,
            "xsimpp": self.task_xsimpp,
            "tatoeba": self.task_tatoeba,
            "bucc": self.task_bucc,
            "sts": self.task_sts,
            "mse": self.task_mse,
            "bias": self.task_bias,
            "geometry": self.task_geometry,
        }
        results: dict[str, TaskResult] = {}
        for name in self.cfg.tasks:
            spec = TASKS[name]
            t0 = time.perf_counter()
            enc0 = self._encode_seconds()
            logger.info("task %s: %s", name, spec.description)
            r = runners[name]()
            r.metric, r.unit = spec.metric, spec.unit
            r.wall_time_s = round(time.perf_counter() - t0, 3)
            r.encode_time_s = round(self._encode_seconds() - enc0, 3)
            results[name] = r
            if r.status == "skipped":
                logger.warning("task %s skipped: %s", name, r.reason)
        plots: list[str] = []
        if self.cfg.plots_dir:
            plots = self.write_plots(results, Path(self.cfg.plots_dir))
        encoding = {"student": self._cache.stats() if self._cache else None}
        if self._teacher_cache is not None and self._teacher_cache is not self._cache:
            encoding["teacher"] = self._teacher_cache.stats()
        return EvalReport(
            model=self.cfg.model,
            config=asdict(self.cfg),
            data=self._data.info() if self._data is not None else {},
            tasks=results,
            encoding=encoding,
            wall_time_s=round(time.perf_counter() - t_start, 3),
            plots=plots,
        )

    def _encode_seconds(self) -> float:
        s = self._cache.seconds if self._cache else 0.0
        if self._teacher_cache is not None and self._teacher_cache is not self._cache:
            s += self._teacher_cache.seconds
        return s


def run_eval(cfg: EvalConfig, model: Any | None = None) -> EvalReport:
    """Run ``cfg.tasks`` on ``cfg.model`` (or on an already loaded ``model``)."""
    return EvalRunner(cfg, model).run()
