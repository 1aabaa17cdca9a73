"""Mining benchmark: babelspace's out-of-core miner vs the in-memory approach of the
sentence-transformers bitext-mining example, on the same embeddings, in one run.

Embeddings are computed ONCE and stored as babelspace shards (``WORKDIR/emb/{src,tgt}``); every method
reads the same vectors. Each method runs in its own subprocess so that peak memory (the process'
peak RSS, ``VmHWM``) does not mix; "delta" is the peak minus the process's resident memory just
before mining (after imports and a small faiss search that allocates the BLAS buffers).

Methods:

- ``babelspace-flat``: :func:`babelspace.mining.threshold.mine_embeddings` on the shards, exact faiss search shard
  by shard within ``--max-memory``;
- ``babelspace-ivf``: the same with an IVF index (``--nprobe``);
- ``in-memory``: what the sentence-transformers example does: all embeddings in RAM, one exact faiss
  ``IndexFlatIP`` per side over the full matrix, ratio-margin scoring of the k nearest neighbours,
  forward + backward best candidates pooled, sorted, greedy one-to-one, threshold. (Written here from
  that description, deliberately without babelspace's code, as the reference.)

Embedding sources (``--embeddings-from``):

- ``random-planted`` (default; what measures search, scoring and selection at scale): ``--n`` clustered
  random unit vectors per side of ``--dim`` dimensions; a fraction ``--gold-fraction`` of the sources has
  a noisy copy (cosine about 1/sqrt(1 + noise^2)) hidden at a random target position; every other
  target is an unrelated vector. The planted copies are the gold pairs.
- ``bible``: real sentences encoded with ``--model`` (default minilm; ~200 sentences/s on 2 cores, so
  keep ``--n`` to a few thousand): sources are verses of ``--src-lang``/``--src-version`` (default
  English WEB), targets verses of ``--tgt-lang``/``--tgt-version`` (default English KJV); a fraction
  ``--gold-fraction`` of the source verses appears on the target side in the other version (gold);
  the other verses of each side are disjoint. One Bible version has 31,102 verses, so this mode is
  limited to about 31,102 / (2 - gold-fraction) sentences per side; for 100k x 100k use
  ``random-planted``, or pass your own ``--src-file``/``--tgt-file`` (no gold, recall not reported).

    python bench/mining.py --n 100000                      # the full comparison (minutes)
    python bench/mining.py --n 5000 --dim 384              # a quick check
    python bench/mining.py --embeddings-from bible --n 3000 --model minilm
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

METHODS = ("babelspace-flat", "babelspace-ivf", "in-memory")


# ----------------------------------------------------------------------------- embeddings (once)
def _unit(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32, copy=False)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return x


def _write_store(directory: Path, x: np.ndarray, name: str, shard_size: int) -> None:
    from babelspace.vectors.shards import Manifest, ShardStore

    store = ShardStore(directory)
    store.initialise(Manifest(name, x.shape[1], "float32", shard_size, len(x), f"{name}-{directory.name}"))
    for i in store.missing_shards():
        store.write_shard(i, x[slice(*store.bounds(i))])


def planted_embeddings(args: argparse.Namespace, out: Path) -> dict[str, object]:
    rng = np.random.default_rng(args.seed)
    n, d = args.n, args.dim
    n_gold = int(round(args.gold_fraction * n))
    centroids = rng.normal(size=(max(8, n // 100), d)).astype(np.float32)

    def cloud(size: int) -> np.ndarray:
        out_ = np.empty((size, d), dtype=np.float32)
        for s in range(0, size, 20000):
            m = min(size, s + 20000) - s
            out_[s : s + m] = _unit(centroids[rng.integers(0, len(centroids), m)] + rng.normal(size=(m, d)))
        return out_

    src = cloud(n)
    tgt = cloud(n)
    positions = rng.permutation(n)[:n_gold]
    for s in range(0, n_gold, 20000):
        e = min(n_gold, s + 20000)
        noise = rng.normal(size=(e - s, d)).astype(np.float32) * (args.noise / np.sqrt(d))
        tgt[positions[s:e]] = _unit(src[s:e] + noise)
    gold = np.stack([np.arange(n_gold), positions], axis=1).astype(np.int64)
    _write_store(out / "src", src, "random-planted", args.shard_size)
    _write_store(out / "tgt", tgt, "random-planted", args.shard_size)
    return {
        "gold": gold,
        "description": f"random-planted: {n} x {n}, dim {d}, {n_gold} planted pairs, noise {args.noise}",
    }


def bible_embeddings(args: argparse.Namespace, out: Path) -> dict[str, object]:
    from babelspace.data.bible import bible_verses
    from babelspace.mining.corpus import fingerprint
    from babelspace.mining.encode import EncodeOptions, encode_to_shards

    gold = None
    if args.src_file:
        from babelspace.mining.corpus import read_sentences

        src_texts = read_sentences(args.src_file).texts
        tgt_texts = read_sentences(args.tgt_file).texts
        description = f"files {args.src_file} / {args.tgt_file}"
    else:
        src_v: dict = {}
        tgt_v: dict = {}
        for split in ("train", "dev", "test"):
            src_v.update(bible_verses(args.src_lang, split, args.src_version))
            tgt_v.update(bible_verses(args.tgt_lang, split, args.tgt_version))
        keys = sorted(set(src_v) & set(tgt_v))
        rng = np.random.default_rng(args.seed)
        keys = [keys[i] for i in rng.permutation(len(keys))]
        # unique texts on each side (repeated formulae would make gold ambiguous)
        seen_s, seen_t, uniq = set(), set(), []
        for k in keys:
            if src_v[k] in seen_s or tgt_v[k] in seen_t:
                continue
            seen_s.add(src_v[k])
            seen_t.add(tgt_v[k])
            uniq.append(k)
        n_gold = int(round(args.gold_fraction * args.n))
        need = n_gold + 2 * (args.n - n_gold)
        if need > len(uniq):
            raise SystemExit(f"the Bible has {len(uniq)} usable verse keys; --n {args.n} needs {need}")
        gold_keys = uniq[:n_gold]
        src_keys = gold_keys + uniq[n_gold : args.n]
        tgt_only = uniq[args.n : args.n + args.n - n_gold]
        tgt_keys = gold_keys + tgt_only
        order = rng.permutation(len(tgt_keys))
        tgt_keys = [tgt_keys[i] for i in order]
        where = {k: i for i, k in enumerate(tgt_keys)}
        src_texts = [src_v[k] for k in src_keys]
        tgt_texts = [tgt_v[k] for k in tgt_keys]
        gold = np.array([[i, where[k]] for i, k in enumerate(gold_keys)], dtype=np.int64)
        description = (
            f"bible: {args.src_lang}/{args.src_version} vs {args.tgt_lang}/{args.tgt_version}, "
            f"{len(src_texts)} x {len(tgt_texts)}, {n_gold} gold pairs, model {args.model}"
        )
    opts = EncodeOptions(shard_size=args.shard_size, batch_size=64, show_progress=True)
    from babelspace.vectors.shards import ShardStore

    t = time.perf_counter()
    for side, texts in (("src", src_texts), ("tgt", tgt_texts)):
        encode_to_shards(
            texts, ShardStore(out / side), args.model, fingerprint(texts), opts, desc=f"encode {side}"
        )
    return {"gold": gold, "description": description, "encode_s": time.perf_counter() - t}


# ----------------------------------------------------------------------------- methods (subprocesses)
def _rss_now() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def _peak_rss() -> int:
    """This process' peak resident memory. VmHWM, not getrusage's ru_maxrss: the latter survives
    fork + exec, so a subprocess would report its parent's peak when that was higher."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _warm_up(dim: int) -> None:
    """One exact search with faiss' full tile size, so BLAS thread buffers exist before measuring."""
    import faiss

    rng = np.random.default_rng(0)
    index = faiss.IndexFlatIP(dim)
    index.add(_unit(rng.normal(size=(2048, dim))))
    index.search(_unit(rng.normal(size=(4096, dim))), 4)


def run_babelspace(emb: Path, index: str, args: argparse.Namespace) -> np.ndarray:
    from babelspace.mining.core import MiningConfig
    from babelspace.mining.threshold import mine_embeddings
    from babelspace.vectors.shards import ShardStore

    cfg = MiningConfig(
        k=args.k,
        index=index,
        nprobe=args.nprobe,
        max_memory=args.max_memory,
        threshold=1.06 if args.threshold is None else args.threshold,  # as the in-memory reference
    )
    r = mine_embeddings(ShardStore(emb / "src"), ShardStore(emb / "tgt"), cfg)
    return np.stack([r.pairs.src, r.pairs.tgt, r.pairs.scores.astype(np.float64)], axis=1)


def run_in_memory(emb: Path, args: argparse.Namespace) -> np.ndarray:
    """All vectors in RAM; exact kNN on the full matrices; ratio margin; union; greedy."""
    import faiss

    def load(side: str) -> np.ndarray:
        files = sorted((emb / side).glob("shard-*.npy"))
        return np.ascontiguousarray(np.concatenate([np.load(f) for f in files]), dtype=np.float32)

    x, y = load("src"), load("tgt")
    k = args.k

    def knn(queries: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        index = faiss.IndexFlatIP(base.shape[1])
        index.add(base)
        return index.search(queries, k)

    x2y_sim, x2y_ind = knn(x, y)
    y2x_sim, y2x_ind = knn(y, x)
    x_mean = x2y_sim.mean(axis=1)
    y_mean = y2x_sim.mean(axis=1)
    # ratio margin of every neighbour: cos / ((mean_x + mean_y) / 2)
    fwd = x2y_sim / ((x_mean[:, None] + y_mean[x2y_ind]) / 2)
    bwd = y2x_sim / ((y_mean[:, None] + x_mean[y2x_ind]) / 2)
    fwd_best = fwd.argmax(axis=1)
    bwd_best = bwd.argmax(axis=1)
    cand_src = np.concatenate([np.arange(len(x)), y2x_ind[np.arange(len(y)), bwd_best]])
    cand_tgt = np.concatenate([x2y_ind[np.arange(len(x)), fwd_best], np.arange(len(y))])
    cand_score = np.concatenate([fwd[np.arange(len(x)), fwd_best], bwd[np.arange(len(y)), bwd_best]])
    taken_src: set[int] = set()
    taken_tgt: set[int] = set()
    out = []
    threshold = 1.06 if args.threshold is None else args.threshold
    for i in np.argsort(-cand_score, kind="stable"):
        s, t = int(cand_src[i]), int(cand_tgt[i])
        if s in taken_src or t in taken_tgt:
            continue
        taken_src.add(s)
        taken_tgt.add(t)
        if cand_score[i] >= threshold:
            out.append((s, t, float(cand_score[i])))
    return np.asarray(out, dtype=np.float64).reshape(-1, 3)


def worker(method: str, emb: Path, result: Path, args: argparse.Namespace) -> None:
    import faiss  # noqa: F401  (imported before the baseline RSS, for every method alike)

    import babelspace.mining  # noqa: F401
    from babelspace.vectors.shards import ShardStore

    _warm_up(ShardStore(emb / "src").dim)
    before = _rss_now()
    t = time.perf_counter()
    if method == "in-memory":
        pairs = run_in_memory(emb, args)
    else:
        pairs = run_babelspace(emb, method.split("-", 1)[1], args)
    wall = time.perf_counter() - t
    np.save(result.with_suffix(".npy"), pairs)
    result.write_text(json.dumps({"wall_s": wall, "peak_rss": _peak_rss(), "rss_before": before}))


# ----------------------------------------------------------------------------- driver
def main() -> None:  # noqa: PLR0915 - a benchmark script: one linear sequence of measurements
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--embeddings-from", choices=["random-planted", "bible"], default="random-planted")
    p.add_argument("--n", type=int, default=100000, help="sentences per side")
    p.add_argument("--dim", type=int, default=384, help="random-planted dimension")
    p.add_argument("--gold-fraction", type=float, default=0.5)
    p.add_argument("--noise", type=float, default=0.6, help="random-planted: noise norm relative to 1")
    p.add_argument("--model", default="minilm", help="bible mode: the encoder")
    p.add_argument("--src-lang", default="en")
    p.add_argument("--src-version", default="4")
    p.add_argument("--tgt-lang", default="en")
    p.add_argument("--tgt-version", default="k")
    p.add_argument("--src-file", type=Path, default=None)
    p.add_argument("--tgt-file", type=Path, default=None)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--threshold", type=float, default=None, help="default 1.06 (ratio margin)")
    p.add_argument("--max-memory", default="256MB", help="babelspace search budget")
    p.add_argument("--nprobe", type=int, default=16)
    p.add_argument("--shard-size", type=int, default=10000)
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_emb", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--_result", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._worker:
        worker(args._worker, args._emb, args._result, args)
        return

    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="babelspace-bench-mining-")
        args.workdir = Path(tmp.name)
    emb = args.workdir / "emb"
    t = time.perf_counter()
    make = planted_embeddings if args.embeddings_from == "random-planted" else bible_embeddings
    info = make(args, emb)
    print(f"{info['description']}; embeddings built once in {time.perf_counter() - t:.1f}s -> {emb}")
    gold = info["gold"]
    gold_set = None if gold is None else set(map(tuple, gold.tolist()))

    rows = []
    passthrough = [a for a in sys.argv[1:] if not a.startswith("--_")]
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        result = args.workdir / f"result-{method}.json"
        cmd = [
            sys.executable,
            __file__,
            *passthrough,
            "--_worker",
            method,
            "--_emb",
            str(emb),
            "--_result",
            str(result),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{method} failed:\n{proc.stderr[-3000:]}")
            continue
        r = json.loads(result.read_text())
        pairs = np.load(result.with_suffix(".npy"))
        mined = set(zip(pairs[:, 0].astype(int).tolist(), pairs[:, 1].astype(int).tolist(), strict=True))
        row = {
            "method": method,
            "wall_s": r["wall_s"],
            "peak_mb": r["peak_rss"] / 2**20,
            "delta_mb": (r["peak_rss"] - r["rss_before"]) / 2**20,
            "pairs": len(mined),
            "mined": mined,
        }
        if gold_set is not None:
            hit = len(mined & gold_set)
            row["recall"] = 100 * hit / len(gold_set)
            row["precision"] = 100 * hit / max(1, len(mined))
        rows.append(row)

    base = next((r for r in rows if r["method"] == "in-memory"), None)
    head = f"{'method':<16} {'wall s':>8} {'x base':>7} {'peak MB':>9} {'delta MB':>9} {'x base':>7} {'pairs':>8} {'recall%':>8} {'prec%':>7} {'agree%':>7}"
    print(
        f"\nk={args.k}, threshold {args.threshold or 1.06}, babelspace --max-memory {args.max_memory}, nprobe {args.nprobe}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        tx = r["wall_s"] / base["wall_s"] if base else float("nan")
        mx = r["delta_mb"] / base["delta_mb"] if base and base["delta_mb"] > 0 else float("nan")
        agree = 100 * len(r["mined"] & base["mined"]) / max(1, len(base["mined"])) if base else float("nan")
        print(
            f"{r['method']:<16} {r['wall_s']:>8.2f} {tx:>7.2f} {r['peak_mb']:>9.0f} {r['delta_mb']:>9.0f} {mx:>7.2f} "
            f"{r['pairs']:>8} {r.get('recall', float('nan')):>8.2f} {r.get('precision', float('nan')):>7.2f} {agree:>7.2f}"
        )
    print("\npeak MB: the subprocess' peak RSS (VmHWM); delta MB: peak minus resident memory after imports")
    print("and a faiss warm-up;")
    print("x base: ratio to in-memory; agree%: share of the in-memory pairs also mined by the method.")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
