"""Mining thresholds on planted pairs: what ``--threshold auto`` reports against what its kept pairs
measure, over three domains, several shares of true pairs and one or more models.

Planted corpora (en -> de; held-out text only as the gold, never seen by any calibration):

- ``bible``: verse pairs of the Bible *test* books hidden among unrelated verses: English verses of
  train books on one side, German verses of *other* train-book verses on the other;
- ``cldr``: CLDR display names of the held-out categories (currencies, units) hidden among short
  UI-like strings: English CLDR names of training categories and the standard library's messages
  (``mono-en:pymsg``) on one side, German CLDR names of *other* training entries on the other;
- ``mixed``: half Bible test verses, half CLDR test names as the gold, hidden among text of other
  registers: English fortunes and docstrings (``mono-en:fortunes``, ``mono-en:pydoc``) on one side,
  German train-book verses and CLDR training names on the other (a crawl-like mix).

Each corpus has ``--size`` sentences per side, of which a share (``--shares``) are the planted pairs.
A kept pair counts as true when it is a planted pair *or* a known translation (the same verse, or a
CLDR entry, in both languages: recurring verse formulae and names shared by two categories are
translations all the same). Methods: ``fixed 1.06`` and ``auto`` (``babelspace.mining.calibration``
at ``--target-precision``, recall on Bible dev pairs); the table gives what ``auto`` reported (its
point estimate, interval and ``precision_kind``), whether the interval contains the kept pairs'
precision and whether the estimate is within 0.10 of it. Every text is encoded once per model (cached with ``--cache``) and mined
with ``babelspace.mining.threshold.mine_embeddings`` (k 4, ratio margin, max retrieval).

    python bench/mining_threshold.py --models e5-small --size 460 --shares 0.13 0.03 0.01 --cache /tmp/mt
"""

from __future__ import annotations

import argparse
import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from babelspace.data.bible import bible_verses
from babelspace.data.sources import load_source
from babelspace.data.sources.cldr import cldr_pairs
from babelspace.mining.core import MiningConfig
from babelspace.mining.threshold import bible_dev_pairs, mine_embeddings
from babelspace.vectors.shards import ArrayMatrix

#: Unpaired sentences per side in each domain's pool (a corpus draws its noise from it).
POOL = 600


@dataclass
class Domain:
    """A pool of gold pairs and unpaired noise per side (each list distinct texts)."""

    name: str
    gold: list[tuple[str, str]]
    noise_src: list[str]
    noise_tgt: list[str]


def _bible_parts(rng: random.Random) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    en_test, de_test = bible_verses("en", "test"), bible_verses("de", "test")
    keys = sorted(set(en_test) & set(de_test))
    gold = [(en_test[k], de_test[k]) for k in rng.sample(keys, 100)]
    en_train, de_train = bible_verses("en", "train"), bible_verses("de", "train")
    train = rng.sample(sorted(set(en_train) & set(de_train)), 2 * POOL)
    return gold, [en_train[k] for k in train[:POOL]], [de_train[k] for k in train[POOL:]]


def _cldr_parts(rng: random.Random) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    gold = [(p.src, p.tgt) for p in cldr_pairs(["de"], split="test").pairs]
    train = [(p.src, p.tgt) for p in cldr_pairs(["de"], split="train").pairs]
    rng.shuffle(train)
    half = len(train) // 2
    taken = {e.lower() for e, _ in train[:half]} | {e.lower() for e, _ in gold}
    tgt = [t for _, t in train[half:] if t.lower() not in taken][:POOL]
    return rng.sample(gold, min(100, len(gold))), [e for e, _ in train[:half]], tgt


def domains(seed: int) -> list[Domain]:
    rng = random.Random(seed)
    b_gold, b_src, b_tgt = _bible_parts(rng)
    c_gold, c_src, c_tgt = _cldr_parts(rng)
    ui = [p.src for p in load_source("mono-en:pymsg", split="train").pairs]
    cldr_src = rng.sample(c_src, POOL // 2) + rng.sample(ui, POOL // 2)
    fortunes = [p.src for p in load_source("mono-en:fortunes", split="train").pairs]
    pydoc = [p.src for p in load_source("mono-en:pydoc", split="train").pairs]
    short = [t for t in fortunes + pydoc if len(t) <= 300]
    mixed_src = rng.sample(short, POOL)
    mixed_tgt = rng.sample(b_tgt, POOL // 2) + rng.sample(c_tgt, POOL // 2)
    mixed_gold = rng.sample(b_gold, 50) + rng.sample(c_gold, 50)
    return [
        Domain("bible", b_gold, b_src, b_tgt),
        Domain("cldr", c_gold, cldr_src, c_tgt),
        Domain("mixed", mixed_gold, mixed_src, mixed_tgt),
    ]


def known_translations() -> set[tuple[str, str]]:
    """Every (English, German) pair the benchmark knows to be translations: verses and CLDR entries."""
    known: set[tuple[str, str]] = set()
    for split in ("train", "dev", "test"):
        en, de = bible_verses("en", split), bible_verses("de", split)
        known.update((en[k], de[k]) for k in set(en) & set(de))
        known.update((p.src, p.tgt) for p in cldr_pairs(["de"], split=split).pairs)
    return known


def planted(domain: Domain, size: int, share: float, seed: int) -> tuple[list[str], list[str], set]:
    """One planted corpus: shuffled source and target sentences and its gold pairs."""
    rng = random.Random(seed)
    n_gold = round(share * size)
    gold = rng.sample(domain.gold, n_gold)
    src = [g[0] for g in gold] + rng.sample(domain.noise_src, size - n_gold)
    tgt = [g[1] for g in gold] + rng.sample(domain.noise_tgt, size - n_gold)
    rng.shuffle(src)
    rng.shuffle(tgt)
    return src, tgt, set(gold)


def encode_all(name: str, texts: list[str], cache: Path | None) -> dict[str, np.ndarray]:
    """Unit vectors of ``texts`` under model ``name`` (read from / written to ``cache``)."""
    uniq = list(dict.fromkeys(texts))
    key = hashlib.sha256("\n".join([name, *uniq]).encode()).hexdigest()[:16]
    file = cache / f"{Path(name).name}-{key}.npy" if cache is not None else None
    if file is not None and file.exists():
        vecs = np.load(file)
    else:
        from babelspace.models.backends import load_backend_encoder
        from babelspace.models.encoder import encode

        model = load_backend_encoder(name)
        vecs = np.asarray(encode(model, uniq, batch_size=64, show_progress=True, normalize=True), np.float32)
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
            np.save(file, vecs)
    return dict(zip(uniq, vecs, strict=True))


def _reported(cal) -> str:
    if cal is None:
        return "—"
    return f"{cal.precision_estimate:.2f} [{cal.precision_low:.2f}, {cal.precision_high:.2f}] {cal.precision_kind}"


def run_corpus(domain, size, share, seed, vec, gold_vecs, known, target) -> list[str]:
    src, tgt, gold = planted(domain, size, share, seed)
    S, T = ArrayMatrix(np.stack([vec[x] for x in src])), ArrayMatrix(np.stack([vec[x] for x in tgt]))
    rows = []
    for method, threshold in (("fixed 1.06", 1.06), ("auto", "auto")):
        cfg = MiningConfig(threshold=threshold, target_precision=target, src_lang="en", tgt_lang="de")
        r = mine_embeddings(S, T, cfg, gold_vecs if threshold == "auto" else None)
        mined = [(src[a], tgt[b]) for a, b in r.pairs.pairs()]
        true = sum(p in gold or p in known for p in mined)
        hits = sum(p in gold for p in mined)
        prec = f"{true / len(mined):.2f}" if mined else "—"
        c = r.calibration
        inside = ""
        if c is not None and mined:
            p = true / len(mined)
            inside = "yes" if c.precision_low - 1e-9 <= p <= c.precision_high + 1e-9 else "no"
            inside += " / " + ("yes" if abs(c.precision_estimate - p) <= 0.10 + 1e-9 else "no")
        rec = f"{c.recall:.2f}" if c is not None and c.recall is not None else "—"
        rows.append(
            f"| {domain.name} | {share:.2f} ({len(gold)}) | {method} | {r.threshold:.4f} | {len(mined)} | "
            f"{prec} | {hits / len(gold):.2f} | {_reported(c)} | {inside} | {rec} |"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["e5-small"])
    ap.add_argument("--size", type=int, default=460, help="sentences per side")
    ap.add_argument("--shares", type=float, nargs="+", default=[0.13, 0.03])
    ap.add_argument("--target-precision", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=None, help="folder for the encoded vectors")
    args = ap.parse_args()
    doms = domains(args.seed)
    known = known_translations()
    dev = bible_dev_pairs("en", "de")
    assert dev is not None
    print(
        "| model | domain | share (gold) | method | threshold | kept | precision | recall | "
        "reported P [interval] kind | inside / P ±0.10 | est. R |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models:
        texts = [t for d in doms for g in d.gold for t in g] + [
            t for d in doms for t in d.noise_src + d.noise_tgt
        ]
        vec = encode_all(name, texts + dev[0] + dev[1], args.cache)
        gold_vecs = (np.stack([vec[x] for x in dev[0]]), np.stack([vec[x] for x in dev[1]]))
        for domain in doms:
            for share in args.shares:
                for row in run_corpus(
                    domain, args.size, share, args.seed, vec, gold_vecs, known, args.target_precision
                ):
                    print(f"| {Path(name).name} |" + row[1:], flush=True)


if __name__ == "__main__":
    main()
