"""``babelspace score`` on a noised bitext: how precisely each filter and the margin threshold drop the
bad rows, and how many of them they find.

The bitext: ``--rows`` en–de verse pairs of the Bible *test* books, of which 20 % get the target of
another row (shuffled), 5 % the same verse in another language (French, Spanish or Italian: a wrong
language, still a translation) and 5 % a copy of the source (identical). Each filter runs alone
(``babelspace.mining.filters.apply_filters``), then ``score_bitext`` runs on the same shards with the
margin threshold alone (``--threshold auto`` at each of ``--targets``) and with every filter followed
by the threshold. For each:
rows dropped, precision (bad rows among the dropped) and recall (dropped among the bad rows, all
kinds, and of the kind the filter is meant for).

    python bench/score_filters.py --model e5-small --rows 600 --work /tmp/score-bench
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from babelspace.data.bible import bible_verses
from babelspace.mining.core import MiningConfig
from babelspace.mining.filters import FILTER_ORDER, FilterOptions, apply_filters
from babelspace.mining.score import ScoreInputs, score_bitext, scores_path

SHARES = {"shuffled": 0.20, "wrong_lang": 0.05, "identical": 0.05}
OTHER_LANGS = ("fr", "es", "it")
LENGTH_RATIO = 2.5
MEANT_FOR = {
    "identical": "identical",
    "lang": "wrong_lang",
    "script": "wrong_lang",
    "length_ratio": "shuffled",
}


def noised_bible(n: int, seed: int) -> tuple[list[tuple[str, str]], list[str]]:
    """Rows (en, "de") and each row's kind: clean, shuffled, wrong_lang or identical."""
    rng = random.Random(seed)
    en, de = bible_verses("en", "test"), bible_verses("de", "test")
    others = {lang: bible_verses(lang, "test") for lang in OTHER_LANGS}
    keys = sorted(set(en) & set(de) & set.intersection(*(set(v) for v in others.values())))
    seen: set[str] = set()
    unique = [k for k in keys if not (en[k] in seen or seen.add(en[k]))]
    chosen = rng.sample(unique, n)
    kinds = ["clean"] * n
    order = list(range(n))
    rng.shuffle(order)
    start = 0
    for kind, share in SHARES.items():
        for i in order[start : start + round(share * n)]:
            kinds[i] = kind
        start += round(share * n)
    rows = [(en[k], de[k]) for k in chosen]
    shuffled = [i for i in range(n) if kinds[i] == "shuffled"]
    donors = shuffled[1:] + shuffled[:1]  # each shuffled row takes the next shuffled row's target
    targets = {i: rows[j][1] for i, j in zip(shuffled, donors, strict=True)}
    for i, k in enumerate(chosen):
        if kinds[i] == "shuffled":
            rows[i] = (rows[i][0], targets[i])
        elif kinds[i] == "wrong_lang":
            rows[i] = (rows[i][0], others[rng.choice(OTHER_LANGS)][k])
        elif kinds[i] == "identical":
            rows[i] = (rows[i][0], rows[i][0])
    return rows, kinds


def _row(name: str, dropped: list[bool], kinds: list[str], meant: str | None) -> str:
    bad = [k != "clean" for k in kinds]
    n_drop, n_bad = sum(dropped), sum(bad)
    hits = sum(d and b for d, b in zip(dropped, bad, strict=True))
    precision = f"{hits / n_drop:.3f}" if n_drop else "—"
    of_kind = "—"
    if meant is not None:
        want = [k == meant for k in kinds]
        of_kind = (
            f"{sum(d and w for d, w in zip(dropped, want, strict=True)) / max(1, sum(want)):.3f} ({meant})"
        )
    return f"| {name} | {n_drop} | {precision} | {hits / n_bad:.3f} | {of_kind} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="e5-small")
    ap.add_argument("--rows", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, required=True, help="folder for the bitext, shards and outputs")
    ap.add_argument("--targets", type=float, nargs="+", default=[0.9, 0.99], help="--target-precision values")
    args = ap.parse_args()
    rows, kinds = noised_bible(args.rows, args.seed)
    args.work.mkdir(parents=True, exist_ok=True)
    tsv = args.work / "noised.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
    counts = {k: kinds.count(k) for k in ("clean", *SHARES)}
    print(f"<!-- {args.rows} rows: {counts} -->")
    print("| dropped by | rows dropped | precision | recall (all bad rows) | recall (its kind) |")
    print("|---|---|---|---|---|")
    src, tgt = [a for a, _ in rows], [b for _, b in rows]
    every = {
        "duplicates": True,
        "identical": True,
        "length_ratio": LENGTH_RATIO,
        "script": True,
        "lang": True,
    }
    for name in FILTER_ORDER:
        one = FilterOptions(**{name: every[name]})
        report = apply_filters(src, tgt, ["en"] * len(rows), ["de"] * len(rows), one)
        print(
            _row(
                f"--filter-{name.replace('_', '-')}",
                [r is not None for r in report.reasons],
                kinds,
                MEANT_FOR.get(name),
            )
        )
    inputs = ScoreInputs(str(tsv), src_lang="en", tgt_lang="de")
    work = args.work / "shards"
    runs = [(f"margin threshold (auto, target {t}) alone", FilterOptions(), t) for t in args.targets]
    runs += [(f"all filters + threshold (auto, target {t})", FilterOptions(**every), t) for t in args.targets]
    for label, filters, target in runs:
        out = args.work / f"kept-{len(filters.enabled())}-{target}.tsv"
        cfg = MiningConfig(threshold="auto", target_precision=target)
        s = score_bitext(inputs, out, args.model, cfg, filters=filters, workdir=work)
        verdicts = [line.split("\t")[2] for line in scores_path(out).read_text(encoding="utf-8").splitlines()]
        print(
            _row(label, [v != "kept" for v in verdicts], kinds, "shuffled" if not filters.enabled() else None)
        )
        print(f"<!-- {label}: threshold {s['threshold']:.4f}; {s['threshold_source']} -->")


if __name__ == "__main__":
    main()
