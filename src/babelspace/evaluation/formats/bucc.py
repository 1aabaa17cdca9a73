"""BUCC 2018 task files (``{src}-{tgt}.{split}.{src|tgt|gold}``): read, write, and build a BUCC-style
task (gold pairs hidden among unrelated sentences) from any parallel corpus, split into training and
test halves. Scoring is :mod:`babelspace.metrics.bucc`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Collection, Sequence
from pathlib import Path

from babelspace.data.lines import strict_lines
from babelspace.errors import CorpusFormatError, ResourceError
from babelspace.metrics.bucc import BuccSplit, BuccTask

logger = logging.getLogger(__name__)


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
