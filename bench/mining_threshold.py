"""Mining threshold: ``--threshold auto`` vs LASER's fixed 1.06, precision and recall on planted pairs.

Planted corpus (held-out text only as the gold, never used for calibration): ``--gold`` en-de verse
pairs of the Bible *test* books hidden among ``--noise`` unrelated sentences per side — English
verses of the train books on one side and German verses of *other* train-book verses on the other,
so no noise sentence has a counterpart. Each model mines it twice with ``babelspace mine``'s library
entry point: at 1.06 and at ``auto`` (calibrated on the Bible *dev* books, see
``babelspace.mining.threshold``). Shards are shared between the two runs (encoded once).

    python bench/mining_threshold.py --models minilm e5-small --gold 60 --noise 400
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from babelspace.data.bible import bible_verses
from babelspace.mining.core import MiningConfig
from babelspace.mining.pipeline import mine_files


def planted(gold: int, noise: int, seed: int) -> tuple[list[str], list[str], set[tuple[str, str]]]:
    rng = random.Random(seed)
    en_test, de_test = bible_verses("en", "test"), bible_verses("de", "test")
    test_keys = sorted(set(en_test) & set(de_test))
    gold_keys = rng.sample(test_keys, gold)
    en_train, de_train = bible_verses("en", "train"), bible_verses("de", "train")
    train_keys = sorted(set(en_train) & set(de_train))
    picked = rng.sample(train_keys, 2 * noise)
    src = [en_test[k] for k in gold_keys] + [en_train[k] for k in picked[:noise]]
    tgt = [de_test[k] for k in gold_keys] + [de_train[k] for k in picked[noise:]]
    rng.shuffle(src)
    rng.shuffle(tgt)
    return src, tgt, {(en_test[k], de_test[k]) for k in gold_keys}


def score(out: Path, gold: set[tuple[str, str]]) -> tuple[int, float, float]:
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    hits = sum((r[1], r[2]) in gold for r in rows)
    return len(rows), hits / len(rows) if rows else 0.0, hits / len(gold)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["minilm", "e5-small"])
    ap.add_argument("--gold", type=int, default=60)
    ap.add_argument("--noise", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    src, tgt, gold = planted(args.gold, args.noise, args.seed)
    print(f"{len(src)} en x {len(tgt)} de sentences, {len(gold)} planted pairs")
    print("| model | threshold | value | kept | precision | recall | one-to-one | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "en.txt").write_text("\n".join(src) + "\n", encoding="utf-8")
        (d / "de.txt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
        for model in args.models:
            for mode in (1.06, "auto"):
                cfg = MiningConfig(threshold=mode, src_lang="en", tgt_lang="de")
                out = d / f"{model}-{mode}.tsv"
                t0 = time.perf_counter()
                s = mine_files(d / "en.txt", d / "de.txt", out, model, cfg, workdir=d / f"{model}.work")
                kept, p, r = score(out, gold)
                print(
                    f"| {model} | {mode} | {s['threshold']:.4f} | {kept} | {p:.2f} | {r:.2f} | "
                    f"{s['one_to_one']} | {time.perf_counter() - t0:.0f} |",
                    flush=True,
                )
                if mode == "auto":
                    print(f"<!-- {model}: {s['threshold_source']} -->")
    print(json.dumps({"gold": len(gold), "noise": args.noise, "seed": args.seed}))


if __name__ == "__main__":
    main()
