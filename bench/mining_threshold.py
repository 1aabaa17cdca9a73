"""Mining thresholds on planted pairs: the precision-aimed ``--threshold auto``, the earlier F1-optimal
auto threshold and LASER's fixed 1.06, over two domains and two shares of true pairs.

Planted corpora (en -> de; held-out text only as the gold, never used by any calibration):

- ``bible``: verse pairs of the Bible *test* books hidden among unrelated verses: English verses of
  train books on one side, German verses of *other* train-book verses on the other;
- ``cldr``: CLDR display names of the held-out categories (currencies, units) hidden among short
  UI-like strings: English CLDR names of training categories and the standard library's messages
  (``mono-en:pymsg``) on one side, German CLDR names of *other* training entries on the other.

Each corpus has ``--size`` sentences per side, of which a share (``--shares``) are the planted pairs.
Methods: ``fixed 1.06``; ``old auto`` (the F1-optimal threshold on planted Bible dev verses, the
previous default); ``new auto`` (``babelspace.mining.calibration``: decoy searches of the corpus
itself, target precision 0.9, recall estimated on Bible dev pairs). Every text is encoded once per
model and mined with ``babelspace.mining.threshold.mine_embeddings`` (k 4, ratio margin, max retrieval).

    python bench/mining_threshold.py --models e5-small --size 460 --shares 0.13 0.03
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from babelspace.data.bible import bible_verses
from babelspace.data.sources import load_source
from babelspace.data.sources.cldr import cldr_pairs
from babelspace.metrics.bucc import tune_threshold
from babelspace.mining.core import MiningConfig
from babelspace.mining.shards import ArrayMatrix
from babelspace.mining.threshold import bible_dev_pairs, mine_embeddings, planted_bible_dev

#: Unpaired sentences per side in each domain's pool (a corpus draws its noise from it).
POOL = 600


@dataclass
class Domain:
    """A pool of gold pairs and unpaired noise per side (each list distinct texts)."""

    name: str
    gold: list[tuple[str, str]]
    noise_src: list[str]
    noise_tgt: list[str]


def bible_domain(rng: random.Random) -> Domain:
    en_test, de_test = bible_verses("en", "test"), bible_verses("de", "test")
    keys = sorted(set(en_test) & set(de_test))
    gold = [(en_test[k], de_test[k]) for k in rng.sample(keys, 100)]
    en_train, de_train = bible_verses("en", "train"), bible_verses("de", "train")
    train = rng.sample(sorted(set(en_train) & set(de_train)), 2 * POOL)
    return Domain("bible", gold, [en_train[k] for k in train[:POOL]], [de_train[k] for k in train[POOL:]])


def cldr_domain(rng: random.Random) -> Domain:
    gold = [(p.src, p.tgt) for p in cldr_pairs(["de"], split="test").pairs]
    train = [(p.src, p.tgt) for p in cldr_pairs(["de"], split="train").pairs]
    rng.shuffle(train)
    half = len(train) // 2
    ui = [p.src for p in load_source("mono-en:pymsg", split="train").pairs]
    src_cldr = [e for e, _ in train[:half]]
    src = rng.sample(src_cldr, min(POOL // 2, len(src_cldr))) + rng.sample(ui, min(POOL // 2, len(ui)))
    taken = {t.lower() for t in src} | {t.lower() for _, t in train[:half]} | {e.lower() for e, _ in gold}
    tgt = [t for _, t in train[half:] if t.lower() not in taken][:POOL]
    return Domain("cldr", rng.sample(gold, min(100, len(gold))), src, tgt)


def planted(
    domain: Domain, size: int, share: float, seed: int
) -> tuple[list[int], list[int], list[int], int]:
    """Indices (into gold, noise_src, noise_tgt) of one planted corpus, and its gold count."""
    rng = random.Random(seed)
    n_gold = round(share * size)
    gold = rng.sample(range(len(domain.gold)), n_gold)
    src = rng.sample(range(len(domain.noise_src)), size - n_gold)
    tgt = rng.sample(range(len(domain.noise_tgt)), size - n_gold)
    return gold, src, tgt, n_gold


def encode_all(model, texts: list[str]) -> dict[str, np.ndarray]:
    from babelspace.models.encoder import encode

    uniq = list(dict.fromkeys(texts))
    vecs = encode(model, uniq, batch_size=64, show_progress=False, normalize=True)
    return dict(zip(uniq, np.asarray(vecs, dtype=np.float32), strict=True))


def old_auto(vec: dict[str, np.ndarray]) -> float:
    """The previous default: F1-optimal on the planted Bible dev corpus (a third parallel)."""
    from babelspace.retrieval.knn import Candidates

    s, t, gold = planted_bible_dev("en", "de")
    r = mine_embeddings(
        ArrayMatrix(np.stack([vec[x] for x in s])),
        ArrayMatrix(np.stack([vec[x] for x in t])),
        MiningConfig(threshold=float("-inf")),
    )
    p = r.pairs
    return tune_threshold(Candidates(p.src, p.tgt, p.scores), gold)[0]


def run_corpus(
    domain: Domain, size: int, share: float, seed: int, vec, gold_vecs, old: float, dump: Path | None = None
) -> list[str]:
    gi, si, ti, n_gold = planted(domain, size, share, seed)
    rng = np.random.default_rng(seed)
    src = [domain.gold[i][0] for i in gi] + [domain.noise_src[i] for i in si]
    tgt = [domain.gold[i][1] for i in gi] + [domain.noise_tgt[i] for i in ti]
    ps, pt = rng.permutation(len(src)), rng.permutation(len(tgt))
    src, tgt = [src[i] for i in ps], [tgt[i] for i in pt]
    truth = {(domain.gold[i][0], domain.gold[i][1]) for i in gi}
    S, T = ArrayMatrix(np.stack([vec[x] for x in src])), ArrayMatrix(np.stack([vec[x] for x in tgt]))
    rows = []
    for method, threshold in (("fixed 1.06", 1.06), ("old auto", old), ("new auto", "auto")):
        cfg = MiningConfig(threshold=threshold, src_lang="en", tgt_lang="de")
        t0 = time.perf_counter()
        r = mine_embeddings(S, T, cfg, gold_vecs if threshold == "auto" else None)
        mined = [(src[a], tgt[b]) for a, b in r.pairs.pairs()]
        hits = sum(p in truth for p in mined)
        if dump is not None:
            name = f"{domain.name}-{share:.2f}-{method.replace(' ', '_')}.tsv"
            (dump / name).write_text(
                "".join(
                    f"{int(p in truth)}\t{sc:.4f}\t{p[0]}\t{p[1]}\n"
                    for p, sc in zip(mined, r.pairs.scores, strict=True)
                ),
                encoding="utf-8",
            )
        prec = hits / len(mined) if mined else float("nan")
        c = r.calibration
        est = f"{c.precision:.2f} / {c.recall:.2f}" if c and c.recall is not None else "—"
        rows.append(
            f"| {domain.name} | {share:.2f} ({n_gold}) | {method} | {r.threshold:.4f} | {len(mined)} | "
            f"{prec:.2f} | {hits / n_gold:.2f} | {est} | {time.perf_counter() - t0:.1f} |"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["e5-small"])
    ap.add_argument("--size", type=int, default=460, help="sentences per side")
    ap.add_argument("--shares", type=float, nargs="+", default=[0.13, 0.03])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--dump", type=Path, default=None, help="write each method's kept pairs here (gold flag first)"
    )
    args = ap.parse_args()
    if args.dump is not None:
        args.dump.mkdir(parents=True, exist_ok=True)
    from babelspace.models.backends import load_backend_encoder

    rng = random.Random(args.seed)
    domains = [bible_domain(rng), cldr_domain(rng)]
    dev = bible_dev_pairs("en", "de")
    assert dev is not None
    print(
        "| model | domain | share (gold) | method | threshold | kept | precision | recall | est. P / R | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models:
        t0 = time.perf_counter()
        model = load_backend_encoder(name)
        texts = [t for d in domains for g in d.gold for t in g] + [
            t for d in domains for t in d.noise_src + d.noise_tgt
        ]
        planted_dev = planted_bible_dev("en", "de")
        vec = encode_all(model, texts + dev[0] + dev[1] + planted_dev[0] + planted_dev[1])
        gold_vecs = (np.stack([vec[x] for x in dev[0]]), np.stack([vec[x] for x in dev[1]]))
        old = old_auto(vec)
        print(f"<!-- {name}: encoded {len(vec)} texts in {time.perf_counter() - t0:.0f} s -->", flush=True)
        for domain in domains:
            for share in args.shares:
                rows = run_corpus(domain, args.size, share, args.seed, vec, gold_vecs, old, args.dump)
                for row in rows:
                    print(f"| {name} |" + row[1:], flush=True)


if __name__ == "__main__":
    main()
