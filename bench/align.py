"""Sentence alignment benchmark: ``babelspace align`` (vecalign's embedding cost) against Gale-Church.

Documents come from the offline Bible's verse alignment (:mod:`babelspace.data.bible`): one document
pair per book of ``--books`` (default the held-out Ruth, Jonah, Philippians and James), English
against each of ``--langs``. Each side is perturbed on its own, at random (``--seed``): a verse is
deleted with probability ``--p-delete`` (its counterpart must align 1-0 or 0-1), cut in two at the
clause boundary nearest its middle with probability ``--p-split``, or else joined with the next verse
(and again, up to three) with probability ``--p-merge``; Chinese and Japanese sides are joined without
a space and cut at a character when no punctuation is near the middle. The English document of a book
is the same for every language. The gold alignment follows from the verses: a block ends wherever
both sides have a line boundary at the same point of the verse sequence.

Scores are vecalign's strict ones (Thompson & Koehn 2019, §4.1, ``score.py``): precision over every
predicted block (1-0 and 0-1 included) that equals a gold block, recall over the gold blocks with two
sides, F1 of the two; summed over a language's documents. ``align`` runs with its defaults, and once
more with ``--max-full-dp 40`` on the same embeddings, which sends every document through the
coarse-to-fine band search (a check that the band loses nothing). Speed: aligned sentence pairs per
second of encoding and search, for all languages together (wall time, on whatever else the machine
is doing).

    python bench/align.py --model e5-small
    python bench/align.py --model e5-small --langs de,zh --books 32     # a quick check
"""

from __future__ import annotations

import argparse
import logging
import re
import time
from collections import Counter
from dataclasses import replace

import numpy as np

from babelspace.data.bible import bible_verses, books_of_split
from babelspace.mining.align import align_texts, embed_documents
from babelspace.mining.align_cost import embedding_alignment
from babelspace.mining.align_dp import AlignConfig, Block
from babelspace.mining.encode import EncodeOptions

NO_SPACES = frozenset({"zh", "ja"})
_CLAUSE = re.compile(r"[,;:.!?，；：。！？、]")

Span = tuple[int, int]  # a line's [start, end) in half-verse units


def _cut(text: str, lang: str) -> tuple[str, str] | None:
    """``text`` cut in two at the clause boundary nearest its middle (None when too short)."""
    n = len(text)
    if n < (12 if lang in NO_SPACES else 30):
        return None
    middle = n / 2
    marks = [m.end() for m in _CLAUSE.finditer(text) if 0.25 * n < m.end() < 0.75 * n]
    if not marks and lang not in NO_SPACES:
        marks = [m.start() for m in re.finditer(" ", text) if 0.3 * n < m.start() < 0.7 * n]
    if not marks and lang in NO_SPACES:
        marks = [n // 2]
    if not marks:
        return None
    at = min(marks, key=lambda k: abs(k - middle))
    a, b = text[:at].strip(), text[at:].strip()
    return (a, b) if a and b else None


def perturb(verses: list[str], lang: str, rng: np.random.Generator, p: argparse.Namespace) -> tuple:
    """(lines, spans, deleted verses) of one side."""
    join = "" if lang in NO_SPACES else " "
    deleted = {v for v in range(len(verses)) if rng.random() < p.p_delete}
    lines: list[str] = []
    spans: list[Span] = []
    v = 0
    while v < len(verses):
        if v in deleted:
            v += 1
            continue
        cut = _cut(verses[v], lang) if rng.random() < p.p_split else None
        if cut:
            lines += cut
            spans += [(2 * v, 2 * v + 1), (2 * v + 1, 2 * v + 2)]
            v += 1
            continue
        w = v
        while w + 1 < len(verses) and w + 1 not in deleted and w - v < 2 and rng.random() < p.p_merge:
            w += 1
        lines.append(join.join(verses[v : w + 1]))
        spans.append((2 * v, 2 * w + 2))
        v = w + 1
    return lines, spans, deleted


def gold_blocks(src: tuple, tgt: tuple) -> list[Block]:
    """The gold alignment of two perturbed sides: blocks between the boundaries both sides share."""
    cuts = []
    for _, spans, deleted in (src, tgt):
        side = {a for s in spans for a in s} | {2 * v for v in deleted} | {2 * v + 2 for v in deleted}
        cuts.append(side)
    common = sorted(cuts[0] & cuts[1])
    blocks: list[Block] = []
    for lo, hi in zip(common, common[1:], strict=False):
        s = tuple(i for i, (a, b) in enumerate(src[1]) if lo <= a and b <= hi)
        t = tuple(i for i, (a, b) in enumerate(tgt[1]) if lo <= a and b <= hi)
        if s and t:
            blocks.append((s, t))
        else:
            blocks += [((i,), ()) for i in s] + [((), (i,)) for i in t]
    return blocks


def strict_counts(gold: list[Block], test: list[Block]) -> Counter:
    """vecalign's strict counts: test blocks found in gold, test blocks, and the same for recall
    without 1-0 / 0-1 blocks."""
    gold_set = set(gold)
    full = [b for b in test if b[0] and b[1]]
    test_full = set(full)
    gold_full = [b for b in gold if b[0] and b[1]]
    return Counter(
        p_hit=sum(b in gold_set for b in test),
        p_all=len(test),
        r_hit=sum(b in test_full for b in gold_full),
        r_all=len(gold_full),
    )


def f1(c: Counter) -> tuple[float, float, float]:
    p = c["p_hit"] / c["p_all"] if c["p_all"] else 0.0
    r = c["r_hit"] / c["r_all"] if c["r_all"] else 0.0
    return p, r, 2 * p * r / (p + r) if p + r else 0.0


def build(args: argparse.Namespace) -> dict[str, list[tuple]]:
    """Per language: (English side, target side, gold) for every book; the English side of a book is
    the same for every language (the verses every language has)."""
    books = [int(b) for b in args.books.split(",")]
    langs = args.langs.split(",")
    verses = {lang: bible_verses(lang, "test") for lang in ["en", *langs]}
    out: dict[str, list[tuple]] = {lang: [] for lang in langs}
    for book in books:
        keys = sorted(
            k for k in verses["en"] if k[0] == book and all(verses[g].get(k, "").strip() for g in verses)
        )
        en = perturb([verses["en"][k] for k in keys], "en", np.random.default_rng([args.seed, book]), args)
        for n, lang in enumerate(langs, 1):
            rng = np.random.default_rng([args.seed, book, n])
            tgt = perturb([verses[lang][k] for k in keys], lang, rng, args)
            out[lang].append((en, tgt, gold_blocks(en, tgt)))
    return out


def _count(docs: list[tuple], alignments: list[list[Block]]) -> Counter:
    total: Counter = Counter()
    for (_, _, gold), blocks in zip(docs, alignments, strict=True):
        total.update(strict_counts(gold, blocks))
    return total


def run(args: argparse.Namespace) -> None:
    from babelspace.models.backends import load_backend_encoder

    data = build(args)
    pairs = [(en[0], tgt[0]) for lang in data for en, tgt, _ in data[lang]]
    cfg = AlignConfig()
    t0 = time.perf_counter()
    gc, _ = align_texts(pairs, replace(cfg, method="gale-church"))
    gc_s = time.perf_counter() - t0
    model = load_backend_encoder(args.model, device=args.device)
    opts = EncodeOptions(batch_size=args.batch_size, show_progress=True)
    stats: Counter = Counter()
    vectors = embed_documents(pairs, model, cfg.max_size - 1, opts, stats)
    t0 = time.perf_counter()
    exact = [embedding_alignment(ov0, ov1, cfg)[0] for ov0, ov1 in vectors]
    search_s = time.perf_counter() - t0
    banded_cfg = replace(cfg, max_full_dp=40)
    banded = [embedding_alignment(ov0, ov1, banded_cfg)[0] for ov0, ov1 in vectors]
    _report(args, data, [a.blocks for a in gc], exact, banded)
    written = sum(1 for blocks in exact for s, t in blocks if s and t)
    print(
        f"\nspeed: align {written} sentence pairs in {stats['encode_s']:.0f}s encoding ({stats['texts']} texts) + "
        f"{search_s:.1f}s search = {written / (stats['encode_s'] + search_s):.2f} pairs/s; "
        f"search alone {written / search_s:.0f} pairs/s; gale-church {written / gc_s:.0f} pairs/s "
        "(wall time on a shared machine)"
    )


def _report(args: argparse.Namespace, data: dict, gc: list, exact: list, banded: list) -> None:
    print(
        f"model {args.model}; books {args.books}; p_merge {args.p_merge}, p_split {args.p_split}, "
        f"p_delete {args.p_delete}, seed {args.seed}"
    )
    print(
        "| en-X | lines en / X | gold blocks (not 1-1) | Gale-Church P / R / F1 | align P / R / F1 | align, band F1 |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    i = 0
    for lang, docs in data.items():
        n = len(docs)
        rows = [_count(docs, part[i : i + n]) for part in (gc, exact, banded)]
        i += n
        gold = [b for _, _, g in docs for b in g]
        other = sum(1 for s, t in gold if (len(s), len(t)) != (1, 1))
        lines = f"{sum(len(e[0]) for e, _, _ in docs)} / {sum(len(t[0]) for _, t, _ in docs)}"
        cells = [" / ".join(f"{x:.3f}" for x in f1(c)) for c in rows[:2]]
        print(
            f"| {lang} | {lines} | {len(gold)} ({other}) | {cells[0]} | {cells[1]} | {f1(rows[2])[2]:.3f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="e5-small", help="encoder for align")
    ap.add_argument("--langs", default="de,fr,ru,zh,ja", help="target languages (English is the source)")
    test_books = ",".join(str(b) for b in books_of_split("test") if b != 41)
    ap.add_argument("--books", default=test_books, help="Bible books (numbers), one document pair each")
    ap.add_argument("--p-merge", type=float, default=0.1, help="chance a line takes in the next verse")
    ap.add_argument("--p-split", type=float, default=0.1, help="chance a verse is cut in two lines")
    ap.add_argument("--p-delete", type=float, default=0.01, help="chance a verse is missing on one side")
    ap.add_argument("--seed", type=int, default=0, help="seed of the perturbations")
    ap.add_argument("--batch-size", type=int, default=32, help="encoding batch size")
    ap.add_argument("--device", default="auto", help="torch device for the encoder")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("babelspace.progress").setLevel(logging.INFO)
    run(args)


if __name__ == "__main__":
    main()
