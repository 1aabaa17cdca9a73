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

With ``--vecalign DIR`` (a checkout of https://github.com/thompsonb/vecalign with its Cython
``dp_core`` built in place; never part of babelspace) the same documents are also aligned by the real
vecalign, on the same embeddings: each side's overlaps (vecalign's own ``yield_overlaps``, up to 3
sentences, as ``align`` uses) are written to an overlaps file and a float32 embedding file from the
vectors ``align`` computed (plus vecalign's ``PAD`` line, encoded by the same model), read back with
vecalign's ``read_in_embeddings``/``make_doc_embedding`` and aligned by its ``vecalign()`` with the
defaults of its command line (alignment_max_size 4, del_percentile_frac 0.2, search_buffer_size 5,
max_size_full_dp 300). Both are scored by vecalign's ``score_multiple`` (strict and lax F1, its
``score.py``), and each document is aligned by the two in turn (alternating, so both see the same
load) for the time ratio of the alignment step alone (the embeddings are the same). It also prints
the distribution of ``align``'s score over the correct 1-1 blocks.

    python bench/align.py --model e5-small
    python bench/align.py --model e5-small --langs de,zh --books 32     # a quick check
    python bench/align.py --model e5-small --langs de,ru,zh,ja --books 8,32 --p-delete 0.05 \
        --vecalign /tmp/vecalign
"""

from __future__ import annotations

import argparse
import logging
import re
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

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
    if args.vecalign is not None:
        _vecalign_comparison(args, data, pairs, vectors, model, opts, cfg)
    written = sum(1 for blocks in exact for s, t in blocks if s and t)
    print(
        f"\nspeed: align {written} sentence pairs in {stats['encode_s']:.0f}s encoding ({stats['texts']} texts) + "
        f"{search_s:.1f}s search = {written / (stats['encode_s'] + search_s):.2f} pairs/s; "
        f"search alone {written / search_s:.0f} pairs/s; gale-church {written / gc_s:.0f} pairs/s "
        "(wall time on a shared machine)"
    )


def _vecalign_side(lines, ov: np.ndarray, pad: np.ndarray, stem: Path, max_overlap: int) -> np.ndarray:
    """One side's overlaps and embeddings written as vecalign's files (vectors from ``align``'s
    overlap vectors ``ov``) and read back by vecalign into its document embedding."""
    from vecalign.dp_utils import make_doc_embedding, read_in_embeddings, yield_overlaps

    from babelspace.mining.align_cost import overlap_texts

    vec_of = {"PAD": pad}
    for k, layer in enumerate(overlap_texts(list(lines), max_overlap), 1):
        for i, text in enumerate(layer):
            vec_of[text] = ov[k - 1, i + k - 1]
    texts = list(dict.fromkeys(yield_overlaps(lines, max_overlap)))
    missing = [t for t in texts if t not in vec_of]
    if missing:  # never expected: the two join overlaps the same way
        raise RuntimeError(f"{len(missing)} vecalign overlaps without an align vector: {missing[:2]}")
    stem.with_suffix(".overlaps").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    np.stack([vec_of[t] for t in texts]).astype(np.float32).tofile(stem.with_suffix(".emb"))
    sent2line, emb = read_in_embeddings(str(stem.with_suffix(".overlaps")), str(stem.with_suffix(".emb")))
    return make_doc_embedding(sent2line, emb, list(lines), max_overlap)


def _vecalign_comparison(args, data, pairs, vectors, model, opts, cfg) -> None:
    """The real vecalign on the same documents and embeddings, both scored by vecalign's scorer."""
    import math
    import sys
    import tempfile
    from pathlib import Path

    from babelspace.mining.align_cost import block_scores
    from babelspace.models.encoder import encode

    sys.path.insert(0, str(args.vecalign))
    from vecalign.dp_utils import make_alignment_types
    from vecalign.dp_utils import vecalign as run_vecalign
    from vecalign.score import score_multiple

    max_overlap = cfg.max_size - 1
    pad = np.asarray(encode(model, ["PAD"], show_progress=False, normalize=True), np.float32)[0]
    types = make_alignment_types(cfg.max_size)
    width_over2 = math.ceil(cfg.max_size / 2.0) + 5
    ours, theirs, t_ours, t_theirs = [], [], 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for d, ((src, tgt), (ov0, ov1)) in enumerate(zip(pairs, vectors, strict=True)):
            docs = [
                _vecalign_side(lines, ov, pad, Path(tmp) / f"{d}.{side}", max_overlap)
                for side, lines, ov in (("src", src, ov0), ("tgt", tgt, ov1))
            ]
            np.random.seed(cfg.seed)
            t0 = time.perf_counter()
            stack = run_vecalign(
                vecs0=docs[0], vecs1=docs[1], final_alignment_types=types, del_percentile_frac=0.2,
                width_over2=width_over2, max_size_full_dp=300, costs_sample_size=20000, num_samps_for_norm=100,
            )  # fmt: skip
            t1 = time.perf_counter()
            blocks, costs = embedding_alignment(ov0, ov1, cfg)
            t2 = time.perf_counter()
            t_theirs += t1 - t0
            t_ours += t2 - t1
            theirs.append([(tuple(a), tuple(b)) for a, b in stack[0]["final_alignments"]])
            ours.append((blocks, costs))
    print(
        "\n| en-X | vecalign strict P / R / F1 | align strict P / R / F1 | vecalign lax F1 | align lax F1 |\n"
        "| --- | --- | --- | --- | --- |"
    )
    i, correct_scores = 0, []
    for lang, docs in data.items():
        n = len(docs)
        gold = [[(tuple(s), tuple(t)) for s, t in g] for _, _, g in docs]
        a = score_multiple(gold, [b for b, _ in ours[i : i + n]])
        v = score_multiple(gold, theirs[i : i + n])
        for g, (blocks, costs) in zip(gold, ours[i : i + n], strict=True):
            gset = set(g)
            full = [b for b in blocks if b[0] and b[1]]
            for b, sc in zip(full, block_scores(blocks, costs), strict=True):
                if len(b[0]) == len(b[1]) == 1 and b in gset:
                    correct_scores.append(sc)
        i += n
        fmt = lambda r: f"{r['precision_strict']:.3f} / {r['recall_strict']:.3f} / {r['f1_strict']:.3f}"  # noqa: E731
        print(f"| {lang} | {fmt(v)} | {fmt(a)} | {v['f1_lax']:.3f} | {a['f1_lax']:.3f} |")
    q = np.quantile(correct_scores, [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99])
    print(
        f"\nalignment step alone, alternating document by document: vecalign {t_theirs:.2f}s, align "
        f"{t_ours:.2f}s (align / vecalign = {t_ours / t_theirs:.2f}; wall time on a shared machine)\n"
        f"align's score of the {len(correct_scores)} correct 1-1 blocks: quantiles 1/5/25/50/75/95/99 % = "
        + " / ".join(f"{x:.2f}" for x in q)
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
    ap.add_argument("--vecalign", type=Path, default=None, help="a vecalign checkout with dp_core built")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("babelspace.progress").setLevel(logging.INFO)
    run(args)


if __name__ == "__main__":
    main()
