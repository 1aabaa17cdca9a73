"""Teacher cache at scale: memory and lookup speed of a cache of N vectors read through memory maps.

    HF_HUB_OFFLINE=1 python bench/teacher_cache_scale.py --texts 1000000 --dir /path/on/disk

Writes N synthetic unit vectors of the real teacher's dimension (minilm, 384-d) for the texts
``"sentence <i>"`` as shards of 10,000 (the cache's own writer, no encoding: this measures the read
side), then, in a fresh cache object: the time to open and index them, the process's anonymous
memory (``RssAnon``: what the cache itself holds; the vectors are file-backed pages the kernel may
drop), the time to check every shard (finite values, unit norms) on first use, and lookups of
random batches of 1,024 texts. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, required=True, help="cache folder (N x 1.5 kB on disk)")
    ap.add_argument("--batches", type=int, default=200)
    args = ap.parse_args()

    from babelspace.models.encoder import load_encoder
    from babelspace.training.setup.teacher_cache import SHARD_TEXTS, TeacherCache, _keys_of

    teacher = load_encoder("minilm", device="cpu")
    texts = [f"sentence {i}" for i in range(args.texts)]
    writer = TeacherCache(teacher, "minilm", args.dir)
    rng = np.random.default_rng(0)
    if len(writer) < args.texts:
        t0 = time.perf_counter()
        for s in range(0, args.texts, SHARD_TEXTS):
            chunk = texts[s : s + SHARD_TEXTS]
            vecs = rng.standard_normal((len(chunk), writer.dim), dtype=np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            writer._write_shard(_keys_of(chunk), vecs)
        print(f"wrote {args.texts} vectors in {time.perf_counter() - t0:.1f}s")
    del writer
    anon0 = _status("RssAnon")
    t0 = time.perf_counter()
    cache = TeacherCache(teacher, "minilm", args.dir)
    print(
        f"open + index {len(cache)} vectors: {time.perf_counter() - t0:.1f}s; RssAnon +{_status('RssAnon') - anon0:.0f} MB"
    )
    t0 = time.perf_counter()
    assert not cache.missing(texts)
    print(
        f"keys of all texts + check of every shard: {time.perf_counter() - t0:.1f}s; RssAnon +{_status('RssAnon') - anon0:.0f} MB"
    )
    t0 = time.perf_counter()
    for _ in range(args.batches):
        cache.lookup([texts[i] for i in rng.integers(0, args.texts, 1024)])
    dt = time.perf_counter() - t0
    print(
        f"lookup: {args.batches * 1024 / dt:,.0f} texts/s in random batches of 1,024; "
        f"RssAnon +{_status('RssAnon') - anon0:.0f} MB, RssFile {_status('RssFile'):.0f} MB; "
        f"vectors on disk {args.texts * cache.dim * 4 / 2**20:.0f} MB"
    )


if __name__ == "__main__":
    main()
