"""BUCC 2018 parallel-sentence mining (Zweigenbaum et al., "Overview of the Third BUCC Shared Task:
Spotting Parallel Sentences in Comparable Corpora", BUCC 2018), scored as LASER does
(Artetxe & Schwenk 2019, arXiv 1811.01136, and LASER's ``tasks/bucc``).

Protocol:

1. L2-normalise; for every source take its best target by ratio margin (k=4 neighbourhoods) among its
   k nearest targets (*forward*), and for every target its best source (*backward*).
2. Pool forward and backward candidates, sort by descending score and keep a pair only if neither its
   source nor its target was already taken (greedy one-to-one).
3. Choose the score threshold that maximises F1 on the **training** split and apply that same threshold
   to the **test** split (:func:`bucc_eval`). Precision, recall and F1 are in %.

:func:`optimistic_f1` instead reports the best F1 over thresholds chosen *on the evaluated data itself*
(what the sentence-transformers BUCC example reports). It is an upper bound, not the BUCC protocol.
MTEB's "BUCC" task is a different, easier one (gold pairs only, no distractors).

:func:`build_bucc_task` builds a BUCC-style task (gold pairs hidden among unrelated sentences) from any
parallel corpus, split into training and test halves.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from babelspace.data.lines import strict_lines
from babelspace.errors import CorpusFormatError, ResourceError
from babelspace.evaluation.knn import (
    Backend,
    Candidates,
    Margin,
    greedy_one_to_one,
    l2_normalize,
    mutual_margin_candidates,
)

logger = logging.getLogger(__name__)

GoldPairs = Collection[tuple[int, int]]


#: BUCC's candidate pairs are the shared candidate type of :mod:`babelspace.evaluation.knn`.
BuccCandidates = Candidates


@dataclass
class BuccResult:
    """BUCC protocol result: threshold tuned on train, P/R/F1 (%) on test, and the train F1 (%)."""

    threshold: float
    precision: float
    recall: float
    f1: float
    train_f1: float


@dataclass
class OptimisticBuccResult:
    """Best P/R/F1 (%) over thresholds tuned on the evaluated data itself: an optimistic upper bound."""

    threshold: float
    precision: float
    recall: float
    f1: float


@dataclass
class BuccSplit:
    """One split of a BUCC language pair: sentences with their ids and the gold id pairs."""

    src_lang: str
    tgt_lang: str
    src_ids: list[str]
    src_texts: list[str]
    tgt_ids: list[str]
    tgt_texts: list[str]
    gold: list[tuple[str, str]] | None

    def gold_indices(self) -> set[tuple[int, int]]:
        """Gold pairs as (source row, target row) indices."""
        if self.gold is None:
            raise ValueError("this split has no gold pairs")
        s = {sid: i for i, sid in enumerate(self.src_ids)}
        t = {tid: i for i, tid in enumerate(self.tgt_ids)}
        return {(s[a], t[b]) for a, b in self.gold}


@dataclass
class BuccTask:
    training: BuccSplit
    test: BuccSplit


# --------------------------------------------------------------------------- mining and scoring


def mine_candidates(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    k: int = 4,
    margin: Margin | str = Margin.RATIO,
    *,
    backend: Backend = "faiss",
    chunk_size: int = 16384,
) -> Candidates:
    """Forward + backward best candidates by margin (two kNN searches, retrieval ``max``), made one-to-one
    greedily by descending score."""
    src, tgt = l2_normalize(src_emb), l2_normalize(tgt_emb)
    if src.shape[0] == 0 or tgt.shape[0] == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Candidates(empty, empty.copy(), np.zeros(0, dtype=np.float32))
    pool = mutual_margin_candidates(src, tgt, k, margin, "max", backend=backend, chunk_size=chunk_size)
    return pool.subset(greedy_one_to_one(pool.src, pool.tgt, pool.scores))


def _prf(correct: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    p = correct / n_pred if n_pred else 0.0
    r = correct / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return 100.0 * p, 100.0 * r, 100.0 * f


def precision_recall_f1(pairs: Collection[tuple[int, int]], gold: GoldPairs) -> tuple[float, float, float]:
    """Precision, recall and F1 (%) of predicted ``pairs`` against ``gold`` pairs."""
    gold_set = set(gold)
    correct = sum(1 for p in set(pairs) if p in gold_set)
    return _prf(correct, len(set(pairs)), len(gold_set))


def _sorted(candidates: Candidates) -> Candidates:
    return candidates.subset(np.argsort(-candidates.scores, kind="stable"))


def tune_threshold(candidates: Candidates, gold: GoldPairs) -> tuple[float, float, float, float]:
    """Threshold maximising F1 of ``candidates`` (accepted when score >= threshold): ``(t, P, R, F1)``.

    Only cuts between distinct scores are considered; the threshold is the midpoint between the last
    accepted and the first rejected score (the lowest score when every candidate is accepted). When no
    candidate is right, the threshold lies just above the best score (nothing accepted).
    """
    gold_set = set(gold)
    cands = _sorted(candidates)
    n = len(cands)
    if n == 0:
        return 0.0, 0.0, 0.0, 0.0
    hits = np.array([p in gold_set for p in cands.pairs()], dtype=np.int64)
    correct = np.cumsum(hits)
    best = (0.0, 0.0, 0.0, float(np.nextafter(np.float32(cands.scores[0]), np.float32(np.inf))))
    for i in range(n):
        if i + 1 < n and cands.scores[i + 1] == cands.scores[i]:
            continue  # cannot cut between equal scores
        p, r, f = _prf(int(correct[i]), i + 1, len(gold_set))
        if f > best[0]:
            t = (
                (float(cands.scores[i]) + float(cands.scores[i + 1])) / 2
                if i + 1 < n
                else float(cands.scores[i])
            )
            best = (f, p, r, t)
    f, p, r, t = best
    return t, p, r, f


def apply_threshold(candidates: Candidates, threshold: float) -> Candidates:
    """The candidates whose score is >= ``threshold``."""
    return candidates.subset(candidates.scores >= threshold)


def bucc_eval_candidates(
    train_candidates: Candidates,
    train_gold: GoldPairs,
    test_candidates: Candidates,
    test_gold: GoldPairs,
) -> BuccResult:
    """BUCC protocol on already mined candidates: tune the threshold on train, apply it to test."""
    threshold, _, _, train_f1 = tune_threshold(train_candidates, train_gold)
    accepted = apply_threshold(test_candidates, threshold)
    p, r, f = precision_recall_f1(accepted.pairs(), test_gold)
    logger.info(
        "BUCC: threshold %.4f (train F1 %.2f) -> test P %.2f R %.2f F1 %.2f", threshold, train_f1, p, r, f
    )
    return BuccResult(threshold=threshold, precision=p, recall=r, f1=f, train_f1=train_f1)


def bucc_eval(
    train_src_emb: np.ndarray,
    train_tgt_emb: np.ndarray,
    train_gold: GoldPairs,
    test_src_emb: np.ndarray,
    test_tgt_emb: np.ndarray,
    test_gold: GoldPairs,
    *,
    k: int = 4,
    margin: Margin | str = Margin.RATIO,
    backend: Backend = "faiss",
) -> BuccResult:
    """BUCC 2018 protocol (LASER): mine both splits, tune the threshold on train, report test P/R/F1."""
    train = mine_candidates(train_src_emb, train_tgt_emb, k, margin, backend=backend)
    test = mine_candidates(test_src_emb, test_tgt_emb, k, margin, backend=backend)
    return bucc_eval_candidates(train, train_gold, test, test_gold)


def optimistic_f1(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    gold: GoldPairs,
    *,
    k: int = 4,
    margin: Margin | str = Margin.RATIO,
    backend: Backend = "faiss",
) -> OptimisticBuccResult:
    """OPTIMISTIC: best F1 over thresholds tuned on this same data (sentence-transformers example).

    Not the BUCC protocol (use :func:`bucc_eval`); an upper bound useful when only one split exists.
    """
    cands = mine_candidates(src_emb, tgt_emb, k, margin, backend=backend)
    t, p, r, f = tune_threshold(cands, gold)
    return OptimisticBuccResult(threshold=t, precision=p, recall=r, f1=f)


# --------------------------------------------------------------------------- files


def _bucc_paths(directory: Path, src_lang: str, tgt_lang: str, split: str) -> dict[str, Path]:
    stem = f"{src_lang}-{tgt_lang}.{split}"
    base = directory
    if not (base / f"{stem}.{src_lang}").exists() and (directory / f"{src_lang}-{tgt_lang}").is_dir():
        base = directory / f"{src_lang}-{tgt_lang}"
    return {
        "src": base / f"{stem}.{src_lang}",
        "tgt": base / f"{stem}.{tgt_lang}",
        "gold": base / f"{stem}.gold",
    }


def _read_id_sentences(path: Path) -> tuple[list[str], list[str]]:
    """Ids and sentences of the ``id<TAB>sentence`` lines of ``path``; blank lines are skipped."""
    ids: list[str] = []
    texts: list[str] = []
    seen: dict[str, int] = {}
    for lineno, line in strict_lines(path):
        if not line.strip():
            continue
        if "\t" not in line:
            raise CorpusFormatError(path, lineno, "expected 'id<TAB>sentence', found no tab")
        sid, text = line.split("\t", 1)
        if not sid:
            raise CorpusFormatError(path, lineno, "empty sentence id")
        if not text.strip():
            raise CorpusFormatError(path, lineno, f"empty sentence for id {sid!r}")
        if sid in seen:
            raise CorpusFormatError(path, lineno, f"duplicate id {sid!r} (first on line {seen[sid]})")
        seen[sid] = lineno
        ids.append(sid)
        texts.append(text)
    return ids, texts


def _read_gold(path: Path, src_ids: Collection[str], tgt_ids: Collection[str]) -> list[tuple[str, str]]:
    """The ``src_id<TAB>tgt_id`` lines of ``path``, each id known; blank lines are skipped."""
    gold: list[tuple[str, str]] = []
    for lineno, line in strict_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0] or not fields[1]:
            raise CorpusFormatError(path, lineno, f"expected 'src_id<TAB>tgt_id', got {len(fields)} field(s)")
        a, b = fields
        if a not in src_ids:
            raise CorpusFormatError(path, lineno, f"unknown source id {a!r}")
        if b not in tgt_ids:
            raise CorpusFormatError(path, lineno, f"unknown target id {b!r}")
        gold.append((a, b))
    return gold


def read_bucc(
    directory: str | Path,
    src_lang: str,
    split: str = "training",
    *,
    tgt_lang: str = "en",
    require_gold: bool = True,
) -> BuccSplit:
    """Read ``{xx}-en.{split}.{xx}``, ``{xx}-en.{split}.en`` and ``{xx}-en.{split}.gold``.

    Sentence files have lines ``id<TAB>sentence``; the gold file has lines ``xx_id<TAB>en_id``. The files
    may lie in ``directory`` or in ``directory/{xx}-en``. Malformed lines raise :class:`CorpusFormatError`
    with file and line. Without a gold file, ``require_gold=False`` returns ``gold=None``.
    """
    directory = Path(directory)
    paths = _bucc_paths(directory, src_lang, tgt_lang, split)
    for key in ("src", "tgt"):
        if not paths[key].is_file():
            raise ResourceError(f"{paths[key]}: missing (BUCC 2018 layout {src_lang}-{tgt_lang}.{split}.*)")
    src_ids, src_texts = _read_id_sentences(paths["src"])
    tgt_ids, tgt_texts = _read_id_sentences(paths["tgt"])
    gold: list[tuple[str, str]] | None = None
    if paths["gold"].is_file():
        gold = _read_gold(paths["gold"], set(src_ids), set(tgt_ids))
    elif require_gold:
        raise ResourceError(
            f"{paths['gold']}: missing gold file (pass require_gold=False to read without it)"
        )
    logger.debug("BUCC %s-%s %s: %d / %d sentences", src_lang, tgt_lang, split, len(src_ids), len(tgt_ids))
    return BuccSplit(src_lang, tgt_lang, src_ids, src_texts, tgt_ids, tgt_texts, gold)


def write_bucc(split: BuccSplit, directory: str | Path, split_name: str) -> dict[str, Path]:
    """Write a split in the BUCC 2018 layout (readable by :func:`read_bucc`); returns the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "src": directory / f"{split.src_lang}-{split.tgt_lang}.{split_name}.{split.src_lang}",
        "tgt": directory / f"{split.src_lang}-{split.tgt_lang}.{split_name}.{split.tgt_lang}",
        "gold": directory / f"{split.src_lang}-{split.tgt_lang}.{split_name}.gold",
    }
    for key, ids, texts in (("src", split.src_ids, split.src_texts), ("tgt", split.tgt_ids, split.tgt_texts)):
        with paths[key].open("w", encoding="utf-8") as f:
            for sid, text in zip(ids, texts, strict=True):
                one_line = text.replace("\r", " ").replace("\n", " ")
                f.write(f"{sid}\t{one_line}\n")
    if split.gold is not None:
        with paths["gold"].open("w", encoding="utf-8") as f:
            for a, b in split.gold:
                f.write(f"{a}\t{b}\n")
    return paths


# --------------------------------------------------------------------------- synthetic task


def build_bucc_task(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    distractor_src: Sequence[str],
    distractor_tgt: Sequence[str],
    ratio: float = 10.0,
    seed: int = 0,
    *,
    src_lang: str = "xx",
    tgt_lang: str = "en",
    distractors_parallel: bool = False,
) -> BuccTask:
    """Hide aligned pairs ``src_texts[i] <-> tgt_texts[i]`` among unrelated sentences, BUCC style.

    The gold pairs are shuffled and split in halves (training / test). Each split gets
    ``round(ratio * n_gold)`` distractors per side: source-language sentences from ``distractor_src``
    and target-language sentences from ``distractor_tgt``. Distractors must not translate one another
    or any gold sentence; when the two distractor lists are themselves aligned (e.g. other verses of the
    same parallel corpus) pass ``distractors_parallel=True`` and the two sides are drawn from disjoint
    positions. Duplicate texts are dropped (gold pairs whose text repeats, distractors equal to any gold
    sentence). Too few distractors: all of them are used, with a warning.
    """
    if len(src_texts) != len(tgt_texts):
        raise ValueError(f"{len(src_texts)} source texts but {len(tgt_texts)} target texts")
    if distractors_parallel and len(distractor_src) != len(distractor_tgt):
        raise ValueError("distractors_parallel=True needs distractor lists of equal length")
    if ratio < 0:
        raise ValueError(f"ratio must be >= 0, got {ratio}")
    rng = random.Random(seed)

    from babelspace.data.pairs import unique_text_pairs  # lazily: babelspace.data loads torch

    aligned = list(zip(src_texts, tgt_texts, strict=True))
    pairs = [aligned[i] for i in unique_text_pairs(aligned)]
    seen_s, seen_t = {s for s, _ in pairs}, {t for _, t in pairs}
    if len(pairs) < len(src_texts):
        logger.info("build_bucc_task: dropped %d gold pairs with repeated text", len(src_texts) - len(pairs))
    rng.shuffle(pairs)
    half = len(pairs) // 2
    gold_splits = {"training": pairs[:half], "test": pairs[half:]}

    if distractors_parallel:
        positions = list(range(len(distractor_src)))
        rng.shuffle(positions)
        mid = len(positions) // 2
        d_src = [distractor_src[i] for i in positions[:mid]]
        d_tgt = [distractor_tgt[i] for i in positions[mid:]]
    else:
        d_src, d_tgt = list(distractor_src), list(distractor_tgt)
        rng.shuffle(d_src)
        rng.shuffle(d_tgt)
    d_src = [s for s in dict.fromkeys(d_src) if s not in seen_s]
    d_tgt = [t for t in dict.fromkeys(d_tgt) if t not in seen_t]

    need = {name: round(ratio * len(g)) for name, g in gold_splits.items()}
    splits: dict[str, BuccSplit] = {}
    offset_s = offset_t = 0
    for name, gold_pairs in gold_splits.items():
        n_s = min(need[name], max(0, len(d_src) - offset_s))
        n_t = min(need[name], max(0, len(d_tgt) - offset_t))
        if n_s < need[name] or n_t < need[name]:
            logger.warning(
                "build_bucc_task: %s split wanted %d distractors per side, got %d / %d",
                name,
                need[name],
                n_s,
                n_t,
            )
        side_s = [(s, True) for s, _ in gold_pairs] + [(s, False) for s in d_src[offset_s : offset_s + n_s]]
        side_t = [(t, True) for _, t in gold_pairs] + [(t, False) for t in d_tgt[offset_t : offset_t + n_t]]
        offset_s += n_s
        offset_t += n_t
        rng.shuffle(side_s)
        rng.shuffle(side_t)
        src_ids = [f"{src_lang}-{i:09d}" for i in range(len(side_s))]
        tgt_ids = [f"{tgt_lang}-{i:09d}" for i in range(len(side_t))]
        s_id = {text: sid for sid, (text, is_gold) in zip(src_ids, side_s, strict=True) if is_gold}
        t_id = {text: tid for tid, (text, is_gold) in zip(tgt_ids, side_t, strict=True) if is_gold}
        gold = sorted((s_id[s], t_id[t]) for s, t in gold_pairs)
        splits[name] = BuccSplit(
            src_lang, tgt_lang, src_ids, [s for s, _ in side_s], tgt_ids, [t for t, _ in side_t], gold
        )
    return BuccTask(training=splits["training"], test=splits["test"])
