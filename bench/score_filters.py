"""``babelspace score`` on planted bitexts: per corruption type the share of rows dropped, the share of
true rows kept and the AUC of the margin score, with a tuning part and a held-out part.

The cells are built from the repository's offline resources only (no text of the held-out sets the
rules name): three registers,

- ``verse``: Bible verses (English against German, French or Russian),
- ``phrase``: CLDR display names and phrases (English against German, French, Spanish, Italian or
  Russian: short strings, many language pairs in one file),
- ``paragraph``: Bible paragraphs, three consecutive verses joined (English against German or
  French),

each as a **tuning** cell from the Bible *train* books and CLDR's *train* split, and a **held-out** cell
from the Bible *test* books and CLDR's *test* split (never looked at while choosing the rule). Each
cell's rows are true translations, then corrupted: ``misaligned`` (a share from ``--shares``,
cycling over the cells: the target of another row), ``wrong_lang`` (5 %: the same item in another
language, the row still naming the intended one), ``copy`` (5 %: the source copied as the target) and
``near_duplicate`` (5 % more rows: repeats of true rows differing in case, spacing or final
punctuation, appended after the rows they repeat); shares are of the drawn rows. Every cell is a 4-column TSV (``src, tgt, src_lang, tgt_lang``)
that any version of ``babelspace score`` reads, with its rows' kinds beside it.

    python bench/score_filters.py build --work /tmp/score-bench
    python bench/score_filters.py run --work /tmp/score-bench --model e5-small
    python bench/score_filters.py table --work /tmp/score-bench --runs /tmp/score-bench/runs/e5-small

``run`` scores every cell with this checkout's defaults (``score_bitext`` with its default
``ScoreConfig`` and ``FilterOptions``; the shards go to ``WORK/shards/<model>/<cell>``). ``table``
reads the ``CELL.scores.tsv`` files (origin, score, verdict per row, in input order) of any folder of
runs, so the defaults of another version of babelspace are measured by running its own CLI on the
same cells (``babelspace score WORK/cells/CELL.tsv --model M --out DIR/CELL.tsv``) and giving ``table``
that folder. Per cell: rows, the share of each corruption type dropped, true rows kept, the AUC of
true against misaligned rows (measured on the gold kinds) and the summary's estimates.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

KINDS = ("misaligned", "wrong_lang", "copy", "near_duplicate")
SHARE = {"wrong_lang": 0.05, "copy": 0.05, "near_duplicate": 0.05}
OTHER = {"de": "fr", "fr": "es", "ru": "it", "es": "de", "it": "fr"}

#: (name, part, register, split, target languages, rows)
CELLS = (
    ("verse-tune", "tuning", "verse", "train", ("de", "fr"), 300),
    ("phrase-tune", "tuning", "phrase", "train", ("de", "fr", "es", "it", "ru"), 300),
    ("paragraph-tune", "tuning", "paragraph", "train", ("de", "fr"), 150),
    ("verse-heldout", "held-out", "verse", "test", ("de", "ru"), 400),
    ("phrase-heldout", "held-out", "phrase", "test", ("de", "fr", "ru"), 400),
    ("paragraph-heldout", "held-out", "paragraph", "test", ("de", "fr"), 200),
)


def _bible_items(split: str, langs: tuple[str, ...], paragraph: bool) -> dict[str, dict[str, str]]:
    """``{key: {lang: text}}`` of verses (or of three-verse paragraphs) every language has."""
    from babelspace.data.bible import bible_verses

    want = ("en", *langs, *(OTHER[lang] for lang in langs))
    verses = {lang: bible_verses(lang, split) for lang in dict.fromkeys(want)}
    keys = sorted(set.intersection(*(set(v) for v in verses.values())))
    if not paragraph:
        return {str(k): {lang: verses[lang][k] for lang in verses} for k in keys}
    out = {}
    for i in range(0, len(keys) - 2, 3):
        group = keys[i : i + 3]
        if len({(b, c) for b, c, _ in group}) == 1:  # one chapter
            out[str(group[0])] = {lang: " ".join(verses[lang][k] for k in group) for lang in verses}
    return out


def _cldr_items(split: str, langs: tuple[str, ...]) -> dict[str, dict[str, str]]:
    from babelspace.data.readers import load_parallel

    want = tuple(dict.fromkeys((*langs, *(OTHER[lang] for lang in langs))))
    items: dict[str, dict[str, str]] = {}
    for p in load_parallel("cldr", split=split, langs=list(want)).pairs:
        key = p.origin
        items.setdefault(key, {"en": p.src})[p.tgt_lang] = p.tgt
    return {k: v for k, v in items.items() if all(lang in v for lang in want)}


def _near(text: str, rng: random.Random) -> str:
    change = rng.choice(("case", "space", "punct"))
    if change == "case":
        return text.lower() if text != text.lower() else text.upper()
    if change == "space":
        return text.replace(" ", "  ", 1) + " "
    return text.rstrip(".!?,;:") + ("" if text[-1:] in ".!?" else ".")


def build_cell(register: str, split: str, langs: tuple[str, ...], n: int, share: float, seed: int):
    """Rows ``(src, tgt, src_lang, tgt_lang)`` and each row's kind (``true`` or one of :data:`KINDS`)."""
    rng = random.Random(seed)
    if register == "phrase":
        items = _cldr_items(split, langs)
    else:
        items = _bible_items(split, langs, paragraph=register == "paragraph")
    seen: set[str] = set()
    keys = [k for k in sorted(items) if not (items[k]["en"] in seen or seen.add(items[k]["en"]))]
    chosen = rng.sample(keys, min(len(keys), n))
    m = len(chosen)
    n_near = round(SHARE["near_duplicate"] * m)
    rows = []
    for i, k in enumerate(chosen):
        lang = langs[i % len(langs)]
        rows.append([items[k]["en"], items[k][lang], "en", lang])
    kinds = ["true"] * m
    order = list(range(m))
    rng.shuffle(order)
    counts = {"misaligned": round(share * m), "wrong_lang": round(SHARE["wrong_lang"] * m)}
    counts["copy"] = round(SHARE["copy"] * m)
    start = 0
    for kind, c in counts.items():
        for i in order[start : start + c]:
            kinds[i] = kind
        start += c
    mis = [i for i in range(m) if kinds[i] == "misaligned"]
    donors = mis[1:] + mis[:1]  # each misaligned row takes the next misaligned row's target
    targets = {i: rows[j][1] for i, j in zip(mis, donors, strict=True)}
    for i, k in enumerate(chosen):
        if kinds[i] == "misaligned":
            rows[i][1] = targets[i]
        elif kinds[i] == "wrong_lang":
            rows[i][1] = items[k][OTHER[rows[i][3]]]
        elif kinds[i] == "copy":
            rows[i][1] = rows[i][0]
    originals = [i for i in range(m) if kinds[i] == "true"]
    for i in rng.sample(originals, min(n_near, len(originals))):
        src, tgt, sl, tl = rows[i]
        rows.append([_near(src, rng), tgt if rng.random() < 0.5 else _near(tgt, rng), sl, tl])
        kinds.append("near_duplicate")
    return rows, kinds


def build(args: argparse.Namespace) -> None:
    cells = args.work / "cells"
    cells.mkdir(parents=True, exist_ok=True)
    meta = {}
    for c, (name, part, register, split, langs, n) in enumerate(CELLS):
        share = args.shares[c % len(args.shares)]
        rows, kinds = build_cell(register, split, langs, n, share, args.seed + c)
        text = "".join("\t".join(" ".join(x.split()) for x in r) + "\n" for r in rows)
        (cells / f"{name}.tsv").write_text(text, encoding="utf-8")
        (cells / f"{name}.kinds").write_text("\n".join(kinds) + "\n", encoding="utf-8")
        meta[name] = {"part": part, "register": register, "split": split, "langs": langs, "rows": len(rows)}
        meta[name]["misaligned_share"] = share
        print(f"{name}: {len(rows)} rows, {dict(sorted((k, kinds.count(k)) for k in set(kinds)))}")
    (args.work / "cells.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def run(args: argparse.Namespace) -> None:
    from babelspace.mining.score import ScoreInputs, score_bitext

    meta = json.loads((args.work / "cells.json").read_text(encoding="utf-8"))
    for model in args.model:
        out_dir = args.work / "runs" / Path(model).name
        for name in meta:
            inputs = ScoreInputs(str(args.work / "cells" / f"{name}.tsv"))
            workdir = args.work / "shards" / Path(model).name / name
            s = score_bitext(inputs, out_dir / f"{name}.tsv", model, workdir=workdir)
            print(f"{model} {name}: kept {s['kept']} of {s['rows']}; {s['threshold_source']}")


def _auc(pos: np.ndarray, neg: np.ndarray) -> float | None:
    if not len(pos) or not len(neg):
        return None
    neg = np.sort(neg)
    below = np.searchsorted(neg, pos, side="left")
    at = np.searchsorted(neg, pos, side="right") - below
    return float((below.sum() + 0.5 * at.sum()) / (len(pos) * len(neg)))


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def table(args: argparse.Namespace) -> None:
    meta = json.loads((args.work / "cells.json").read_text(encoding="utf-8"))
    print(
        "| run | cell | part | rows | misaligned share | dropped: misaligned | wrong_lang | copy "
        "| near_duplicate | true rows kept | AUC (measured) | AUC (estimated) | precision / recall (estimated) "
        "| precision / recall (measured) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for run_dir in args.runs:
        for name, m in meta.items():
            kinds = (args.work / "cells" / f"{name}.kinds").read_text(encoding="utf-8").split()
            lines = (run_dir / f"{name}.scores.tsv").read_text(encoding="utf-8").splitlines()
            score = np.array([float(line.split("\t")[1]) for line in lines])
            kept = np.array([line.split("\t")[2] == "kept" for line in lines])
            kind = np.array(kinds)
            dropped = {k: (1 - kept[kind == k].mean()) if (kind == k).any() else None for k in KINDS}
            true = kind == "true"
            auc = _auc(score[true], score[kind == "misaligned"])
            summary = json.loads((run_dir / f"{name}.summary.json").read_text(encoding="utf-8"))
            est = summary.get("auto") or summary.get("calibration") or {}
            est_auc = est.get("auc")
            est_pr = f"{_pct(est.get('precision'))} / {_pct(est.get('recall'))}"
            precision = (kept & true).sum() / kept.sum() if kept.any() else None
            recall = (kept & true).sum() / true.sum()
            print(
                f"| {run_dir.name} | {name} | {m['part']} | {len(kinds)} | {100 * m['misaligned_share']:.0f}% | "
                + " | ".join(_pct(dropped[k]) for k in KINDS)
                + f" | {_pct(kept[true].mean())} | {auc:.3f} | "
                + ("—" if est_auc is None else f"{est_auc:.3f}")
                + f" | {est_pr} | {_pct(precision)} / {_pct(recall)} |"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    b = sub.add_parser("build", help="write the planted cells")
    b.add_argument("--work", type=Path, required=True)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--shares", type=float, nargs="+", default=[0.2, 0.05, 0.3], help="misaligned shares")
    r = sub.add_parser("run", help="score every cell with this checkout's defaults")
    r.add_argument("--work", type=Path, required=True)
    r.add_argument("--model", nargs="+", default=["e5-small"])
    t = sub.add_parser("table", help="the filter table of folders of runs")
    t.add_argument("--work", type=Path, required=True)
    t.add_argument("--runs", type=Path, nargs="+", required=True)
    args = ap.parse_args()
    {"build": build, "run": run, "table": table}[args.step](args)


if __name__ == "__main__":
    main()
