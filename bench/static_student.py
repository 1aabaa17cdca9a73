"""The static student against its parent: encoding speed and retrieval on the Bible's test books.

Builds ``babelspace export PARENT --static`` in process (vocabulary: the tokens of the Bible's *train*
books in every language, and the train splits of the English sources — never the test books), then
encodes the same held-out test verses with the parent (torch, fp32) and with the static model, and
reports sentences/s of each, their ratio, and top-1 accuracy xx->en / en->xx in each model's own space
(mean over the languages), plus, with ``--teacher``, the model's xx vectors against the teacher's
English vectors (teacher space, as exported). Both models run on the same threads.

    HF_HUB_OFFLINE=1 python bench/static_student.py --parent e5-small
    HF_HUB_OFFLINE=1 python bench/static_student.py --parent output/babelspace-student --teacher minilm \
        --save output/static-student   # then: python bench/ood.py --models output/static-student
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import torch


def _vocab_texts(langs: list[str], per_source: int) -> list[str]:
    """Up to ``per_source`` texts of each language's Bible train books and of each English source's
    train split (a seeded sample)."""
    import random

    from babelspace.data.bible import bible_parallel_texts
    from babelspace.data.sources import load_source

    def sample(xs: list[str]) -> list[str]:
        return xs if len(xs) <= per_source else random.Random(0).sample(xs, per_source)

    en, per_lang = bible_parallel_texts(langs, "train")
    texts = sample(list(en)) + [t for xs in per_lang.values() for t in sample(list(xs))]
    for name in ("mono-en:fortunes", "mono-en:pydoc", "mono-en:pymsg"):
        try:
            texts += sample([p.src for p in load_source(name, split="train").pairs])
        except Exception as exc:  # noqa: BLE001 - a missing optional source only narrows the vocabulary
            logging.info("vocabulary: %s unavailable (%s)", name, exc)
    return texts


def _rate(model, texts: list[str], batch_size: int) -> tuple[np.ndarray, float]:  # noqa: ANN001
    from babelspace.models.encoder import encode

    encode(model, texts[:64], batch_size=batch_size)  # warm-up
    t0 = time.perf_counter()
    vecs = encode(model, texts, batch_size=batch_size, show_progress=False)
    return vecs, len(texts) / (time.perf_counter() - t0)


def _accuracy(en: np.ndarray, xx: dict[str, np.ndarray]) -> tuple[float, float]:
    from babelspace.metrics.tatoeba import top1_accuracy

    fwd = [top1_accuracy(v, en) for v in xx.values()]  # already in %
    bwd = [top1_accuracy(en, v) for v in xx.values()]
    return float(np.mean(fwd)), float(np.mean(bwd))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parent", default="e5-small")
    ap.add_argument(
        "--teacher", default=None, help="also report teacher space (the parent is a distilled student)"
    )
    ap.add_argument("--langs", default=None, help="comma-separated (default: every Bible language)")
    ap.add_argument("--test-sentences", type=int, default=200, help="test verses per language")
    ap.add_argument("--weighting", default="zipf", choices=["zipf", "none"])
    ap.add_argument("--fit", type=int, default=5000, help="sentences of the linear map's fit (0: none)")
    ap.add_argument("--vocab-per-source", type=int, default=2000, help="vocabulary texts per language/source")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--save", default=None, help="also save the static model to this folder (e.g. for bench/ood.py)"
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(args.threads)
    from babelspace.data.bible import bible_languages, bible_parallel_texts
    from babelspace.models.encoder import load_encoder
    from babelspace.models.static import distil_static

    langs = args.langs.split(",") if args.langs else [lang for lang in bible_languages() if lang != "en"]
    parent = load_encoder(args.parent, device="cpu")
    vocab = _vocab_texts(langs, args.vocab_per_source)
    t0 = time.perf_counter()
    import random

    fit = random.Random(1).sample(vocab, min(args.fit, len(vocab))) if args.fit else None
    static = distil_static(parent, texts=vocab, fit_texts=fit, weighting=args.weighting)
    distil_s = time.perf_counter() - t0
    if args.save:
        static.save(args.save)
    n_tokens = int((static[0].embedding.weight.abs().sum(1) > 0).sum())
    en, per_lang = bible_parallel_texts(langs, "test")
    n = args.test_sentences
    en, per_lang = en[:n], {k: v[:n] for k, v in per_lang.items()}
    texts = list(en) + [t for v in per_lang.values() for t in v]
    rows = []
    teacher_en = None
    if args.teacher:
        from babelspace.models.encoder import encode

        teacher_en = encode(load_encoder(args.teacher, device="cpu"), en)
    for name, model, bs in (("parent (torch fp32)", parent, 64), ("static", static, 1024)):
        vecs, rate = _rate(model, texts, bs)
        e, rest = vecs[: len(en)], vecs[len(en) :]
        xx = {lang: rest[i * len(en) : (i + 1) * len(en)] for i, lang in enumerate(per_lang)}
        own = _accuracy(e, xx)
        row = {"model": name, "sent/s": rate, "xx->en": own[0], "en->xx": own[1]}
        if teacher_en is not None:
            row["xx->T(en)"] = _accuracy(teacher_en, xx)[0]
            row["cos(en, T(en))"] = float(np.mean(np.sum(e * teacher_en, axis=1)))
        rows.append(row)
    print(f"\nparent {args.parent}; static: {n_tokens} token vectors ({len(vocab)} vocabulary texts, "
          f"{args.weighting} weights, linear map fitted on {len(fit or [])} train sentences), distilled in {distil_s:.0f} s; {len(langs)} languages x {len(en)} "
          f"test verses; {args.threads} threads")  # fmt: skip
    keys = list(rows[0])
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(f"{r[k]:.1f}" if isinstance(r[k], float) else str(r[k]) for k in keys))
    print(f"static / parent speed: {rows[1]['sent/s'] / rows[0]['sent/s']:.0f}x")


if __name__ == "__main__":
    main()
