"""sentence-transformers evaluators wrapping the array-level tasks of :mod:`babelspace.evaluation`.

Each evaluator takes raw texts when built and encodes them with the model being evaluated at call time
(``model.encode(..., convert_to_numpy=True, normalize_embeddings=...)``), then calls the plain function
of its task. Each has one primary metric and the usual sentence-transformers behaviour: metrics are
prefixed with ``name``, stored in the model card data, and appended to a CSV file in ``output_path``.

Evaluators (task function; primary metric; greater is better):

- ``XsimEvaluator`` (``xsim_errors``; ``error_rate`` %; no)
- ``XsimppEvaluator`` (``xsimpp_errors``; ``error_rate`` %; no)
- ``TranslationAccuracyEvaluator`` (``tatoeba_accuracy``; ``mean_accuracy`` %; yes)
- ``BuccEvaluator`` (``bucc_eval``; ``f1`` %, or ``optimistic_f1`` without a test split; yes)
- ``StsEvaluator`` (``sts_spearman``; ``spearman`` x 100; yes)
- ``MseToTeacherEvaluator`` (``mse_to_teacher``; ``mse_x100``; no)
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypedDict, Unpack

import numpy as np
from sentence_transformers.base.evaluation import BaseEvaluator

from babelspace.metrics.bucc import bucc_eval, optimistic_f1
from babelspace.metrics.mse import mse_to_teacher
from babelspace.metrics.sts import sts_spearman
from babelspace.metrics.tatoeba import tatoeba_accuracy
from babelspace.metrics.xsim import XsimResult, xsim_errors, xsim_multi
from babelspace.metrics.xsimpp import HardNegative, generate_hard_negatives, xsimpp_errors
from babelspace.retrieval.knn import Margin

logger = logging.getLogger(__name__)

TextsOrLangs = Sequence[str] | Mapping[str, Sequence[str]]


class EvaluatorOptions(TypedDict, total=False):
    """The keyword arguments every evaluator takes (defaults in :class:`_Evaluator`)."""

    name: str
    batch_size: int
    show_progress_bar: bool
    normalize_embeddings: bool
    write_csv: bool


class _Evaluator(BaseEvaluator):
    """Shared constructor, encoding, naming, CSV and model-card plumbing.

    Subclasses set their primary metric, its direction and whether vectors are L2-normalised by
    default as class attributes, and pass the shared keyword arguments (:class:`EvaluatorOptions`)
    through to this constructor.
    """

    PRIMARY_METRIC: ClassVar[str]
    GREATER_IS_BETTER: ClassVar[bool]
    NORMALIZE: ClassVar[bool] = True

    def __init__(
        self,
        *,
        name: str = "",
        batch_size: int = 32,
        show_progress_bar: bool = False,
        normalize_embeddings: bool | None = None,
        write_csv: bool = True,
    ) -> None:
        super().__init__()
        self.name = name
        self.primary_metric = self.PRIMARY_METRIC
        self.greater_is_better = self.GREATER_IS_BETTER
        self.batch_size = batch_size
        self.show_progress_bar = show_progress_bar
        self.normalize_embeddings = self.NORMALIZE if normalize_embeddings is None else normalize_embeddings
        self.write_csv = write_csv

    def encode(self, model: Any, texts: Sequence[str]) -> np.ndarray:
        """Encode ``texts`` with ``model``, each distinct text once; rows follow ``texts``."""
        unique = list(dict.fromkeys(texts))
        if not unique:
            return np.zeros((0, 0), dtype=np.float32)
        emb = model.encode(
            unique,
            batch_size=self.batch_size,
            show_progress_bar=self.show_progress_bar,
            convert_to_numpy=True,
            normalize_embeddings=self.normalize_embeddings,
        )
        emb = np.asarray(emb, dtype=np.float32)
        if len(unique) == len(texts):
            return emb
        row = {t: i for i, t in enumerate(unique)}
        return emb[[row[t] for t in texts]]

    def encode_many(self, model: Any, text_lists: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Encode several lists in one pass (a text shared by lists, e.g. English targets, is encoded once)."""
        flat = [t for texts in text_lists for t in texts]
        emb = self.encode(model, flat)
        out, start = [], 0
        for texts in text_lists:
            out.append(emb[start : start + len(texts)])
            start += len(texts)
        return out

    def _csv_name(self) -> str:
        base = type(self).__name__.removesuffix("Evaluator").lower()
        return f"{base}_evaluation_{self.name}_results.csv" if self.name else f"{base}_evaluation_results.csv"

    def _finish(
        self, model: Any, metrics: dict[str, float], output_path: str | None, epoch: int, steps: int
    ) -> dict[str, float]:
        where = f" after epoch {epoch}" if epoch != -1 else ""
        if steps != -1:
            where += f" step {steps}"
        logger.info(
            "%s%s%s: %s",
            self.description,
            f" ({self.name})" if self.name else "",
            where,
            ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()),
        )
        if output_path is not None and self.write_csv:
            path = Path(output_path) / self._csv_name()
            path.parent.mkdir(parents=True, exist_ok=True)
            new = not path.is_file()
            with path.open("a", newline="", encoding="utf-8") as f:
                writer = csv.writer(f)
                if new:
                    writer.writerow(["epoch", "steps", *metrics])
                writer.writerow([epoch, steps, *metrics.values()])
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics


def _as_lang_dict(
    src: TextsOrLangs, tgt: TextsOrLangs, what: str
) -> tuple[dict[str, list[str]], dict[str, list[str]], bool]:
    """Both sides as ``{language: texts}`` (language "" for plain lists), aligned per language."""
    if isinstance(src, Mapping) != isinstance(tgt, Mapping):
        raise TypeError("pass either two lists of texts or two {language: texts} mappings")
    if isinstance(src, Mapping) and isinstance(tgt, Mapping):
        if set(src) != set(tgt):
            raise ValueError(f"languages differ: {sorted(src)} vs {sorted(tgt)}")
        a, b, multi = {k: list(v) for k, v in src.items()}, {k: list(tgt[k]) for k in src}, True
    else:
        a, b, multi = {"": list(src)}, {"": list(tgt)}, False  # type: ignore[arg-type]
    for lang in a:
        if len(a[lang]) != len(b[lang]):
            raise ValueError(f"{lang or what}: {len(a[lang])} vs {len(b[lang])} sentences")
    return a, b, multi


class XsimEvaluator(_Evaluator):
    """xsim error rate (%) of aligned ``src_texts[i] -> tgt_texts[i]``; lower is better.

    ``src_texts``/``tgt_texts`` are lists, or ``{lang: list}`` mappings for several languages: then the
    metrics hold ``error_rate_{lang}`` per language and the micro-averaged ``error_rate``. With
    ``text_errors`` (default) a predicted target with the gold target's text counts as right.
    """

    PRIMARY_METRIC = "error_rate"
    GREATER_IS_BETTER = False

    def __init__(
        self,
        src_texts: TextsOrLangs,
        tgt_texts: TextsOrLangs,
        *,
        margin: Margin | str = Margin.RATIO,
        k: int = 4,
        text_errors: bool = True,
        **options: Unpack[EvaluatorOptions],
    ) -> None:
        super().__init__(**options)
        self.src, self.tgt, self.multi = _as_lang_dict(src_texts, tgt_texts, "xsim")
        self.margin = Margin(margin)
        self.k = k
        self.text_errors = text_errors

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        langs = list(self.src)
        embs = self.encode_many(
            model, [self.src[lang] for lang in langs] + [self.tgt[lang] for lang in langs]
        )
        results: dict[str, XsimResult] = {}
        for i, lang in enumerate(langs):
            src, tgt = embs[i], embs[len(langs) + i]
            results[lang] = xsim_errors(
                src,
                tgt,
                margin=self.margin,
                k=self.k,
                tgt_texts=self.tgt[lang] if self.text_errors else None,
            )
        total = xsim_multi(results)
        metrics = {"error_rate": total.error_rate, "errors": float(total.errors)}
        if self.multi:
            metrics.update({f"error_rate_{lang}": r.error_rate for lang, r in results.items()})
        return self._finish(model, metrics, output_path, epoch, steps)

    def get_config_dict(self) -> dict[str, Any]:
        return {"margin": self.margin.value, "k": self.k}


class XsimppEvaluator(_Evaluator):
    """xsim++ error rate (%) with hard negatives of the English targets; lower is better.

    ``negatives`` default to :func:`generate_hard_negatives` of ``tgt_texts`` (seed 0, one per type).
    Metrics: ``error_rate`` and ``error_rate_{type}`` per negative type (and ``other``).
    """

    PRIMARY_METRIC = "error_rate"
    GREATER_IS_BETTER = False

    def __init__(
        self,
        src_texts: Sequence[str],
        tgt_texts: Sequence[str],
        negatives: Sequence[HardNegative] | None = None,
        *,
        margin: Margin | str = Margin.RATIO,
        k: int = 4,
        **options: Unpack[EvaluatorOptions],
    ) -> None:
        super().__init__(**options)
        if len(src_texts) != len(tgt_texts):
            raise ValueError(f"{len(src_texts)} sources vs {len(tgt_texts)} targets")
        self.src_texts = list(src_texts)
        self.tgt_texts = list(tgt_texts)
        self.negatives = list(negatives) if negatives is not None else generate_hard_negatives(self.tgt_texts)
        self.margin = Margin(margin)
        self.k = k

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        src, tgt, neg = self.encode_many(
            model, [self.src_texts, self.tgt_texts, [h.text for h in self.negatives]]
        )
        result = xsimpp_errors(
            src,
            tgt,
            neg,
            [h.source_index for h in self.negatives],
            [h.type for h in self.negatives],
            self.margin,
            self.k,
            tgt_texts=self.tgt_texts,
        )
        metrics = {"error_rate": result.error_rate}
        metrics.update({f"error_rate_{t}": v for t, v in result.error_rate_by_type.items()})
        return self._finish(model, metrics, output_path, epoch, steps)

    def get_config_dict(self) -> dict[str, Any]:
        return {"margin": self.margin.value, "k": self.k, "negatives": len(self.negatives)}


class TranslationAccuracyEvaluator(_Evaluator):
    """Tatoeba-style cosine top-1 accuracy (%) of aligned ``xx_texts[i] <-> en_texts[i]``, both directions.

    Primary metric ``mean_accuracy`` (mean of xx->en and en->xx, as sentence-transformers reports); with
    ``{lang: texts}`` mappings it is the average over languages, with per-language metrics alongside.
    """

    PRIMARY_METRIC = "mean_accuracy"
    GREATER_IS_BETTER = True

    def __init__(
        self,
        xx_texts: TextsOrLangs,
        en_texts: TextsOrLangs,
        **options: Unpack[EvaluatorOptions],
    ) -> None:
        super().__init__(**options)
        self.xx, self.en, self.multi = _as_lang_dict(xx_texts, en_texts, "tatoeba")

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        langs = list(self.xx)
        embs = self.encode_many(model, [self.xx[lang] for lang in langs] + [self.en[lang] for lang in langs])
        per_lang = {lang: tatoeba_accuracy(embs[i], embs[len(langs) + i]) for i, lang in enumerate(langs)}
        metrics = {
            "xx_to_en": float(np.mean([r.xx_to_en for r in per_lang.values()])),
            "en_to_xx": float(np.mean([r.en_to_xx for r in per_lang.values()])),
            "mean_accuracy": float(np.mean([r.mean for r in per_lang.values()])),
        }
        if self.multi:
            metrics.update({f"mean_accuracy_{lang}": r.mean for lang, r in per_lang.items()})
        return self._finish(model, metrics, output_path, epoch, steps)


class BuccEvaluator(_Evaluator):
    """BUCC-style mining F1 (%): threshold tuned on the training split, applied to the test split.

    Gold pairs are (source row, target row) indices into the given text lists. Without a test split the
    evaluator reports the OPTIMISTIC F1 (threshold tuned on the same data; primary ``optimistic_f1``).
    """

    PRIMARY_METRIC = "f1"
    GREATER_IS_BETTER = True

    def __init__(
        self,
        train_src: Sequence[str],
        train_tgt: Sequence[str],
        train_gold: Collection[tuple[int, int]],
        test_src: Sequence[str] | None = None,
        test_tgt: Sequence[str] | None = None,
        test_gold: Collection[tuple[int, int]] | None = None,
        *,
        margin: Margin | str = Margin.RATIO,
        k: int = 4,
        **options: Unpack[EvaluatorOptions],
    ) -> None:
        has_test = test_src is not None
        if has_test != (test_tgt is not None) or has_test != (test_gold is not None):
            raise ValueError("give all of test_src, test_tgt and test_gold, or none")
        super().__init__(**options)
        if not has_test:
            self.primary_metric = "optimistic_f1"
        self.train = (list(train_src), list(train_tgt), set(train_gold))
        self.test = (list(test_src), list(test_tgt), set(test_gold)) if has_test else None  # type: ignore[arg-type]
        self.margin = Margin(margin)
        self.k = k

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        tr_src, tr_tgt = self.encode_many(model, [self.train[0], self.train[1]])
        if self.test is None:
            opt = optimistic_f1(tr_src, tr_tgt, self.train[2], k=self.k, margin=self.margin)
            metrics = {
                "optimistic_f1": opt.f1,
                "optimistic_precision": opt.precision,
                "optimistic_recall": opt.recall,
                "optimistic_threshold": opt.threshold,
            }
        else:
            te_src, te_tgt = self.encode_many(model, [self.test[0], self.test[1]])
            res = bucc_eval(
                tr_src, tr_tgt, self.train[2], te_src, te_tgt, self.test[2], k=self.k, margin=self.margin
            )
            metrics = {
                "f1": res.f1,
                "precision": res.precision,
                "recall": res.recall,
                "threshold": res.threshold,
                "train_f1": res.train_f1,
            }
        return self._finish(model, metrics, output_path, epoch, steps)

    def get_config_dict(self) -> dict[str, Any]:
        return {"margin": self.margin.value, "k": self.k}


class StsEvaluator(_Evaluator):
    """Spearman x 100 between cosine(s1[i], s2[i]) and ``scores[i]``."""

    PRIMARY_METRIC = "spearman"
    GREATER_IS_BETTER = True
    NORMALIZE = False

    def __init__(
        self,
        s1: Sequence[str],
        s2: Sequence[str],
        scores: Sequence[float] | np.ndarray,
        **options: Unpack[EvaluatorOptions],
    ) -> None:
        super().__init__(**options)
        if not (len(s1) == len(s2) == len(scores)):
            raise ValueError(f"{len(s1)} / {len(s2)} sentences and {len(scores)} scores")
        self.s1, self.s2 = list(s1), list(s2)
        self.scores = np.asarray(scores, dtype=np.float64)

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        e1, e2 = self.encode_many(model, [self.s1, self.s2])
        rho = sts_spearman(e1, e2, self.scores)
        return self._finish(model, {"spearman": rho}, output_path, epoch, steps)


class MseToTeacherEvaluator(_Evaluator):
    """Distance of the student's vectors of ``texts`` to precomputed teacher vectors; lower is better.

    Primary ``mse_x100`` (element-wise mean x 100, sentence-transformers' convention); ``mean_squared_l2``
    (the paper's per-pair squared distance) is reported alongside. Vectors are not normalised.
    """

    PRIMARY_METRIC = "mse_x100"
    GREATER_IS_BETTER = False
    NORMALIZE = False

    def __init__(
        self,
        texts: Sequence[str],
        teacher_embeddings: np.ndarray,
        **options: Unpack[EvaluatorOptions],
    ) -> None:
        super().__init__(**options)
        teacher = np.asarray(teacher_embeddings, dtype=np.float32)
        if teacher.ndim != 2 or teacher.shape[0] != len(texts):
            raise ValueError(f"teacher_embeddings must be [{len(texts)}, dim], got {teacher.shape}")
        self.texts = list(texts)
        self.teacher = teacher

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        res = mse_to_teacher(self.encode(model, self.texts), self.teacher)
        metrics = {"mse_x100": res.elementwise_mse_x100, "mean_squared_l2": res.mean_squared_l2}
        return self._finish(model, metrics, output_path, epoch, steps)
