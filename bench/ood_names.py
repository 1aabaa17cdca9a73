"""Out-of-domain check: CLDR language and territory names (PyPI ``babel``), not Bible verses.

For each model: own xx->en top-1 accuracy (xx names retrieve the English names, both encoded by the
model) and, for models distilled into the teacher's space, xx->teacher-en (xx names encoded by the
model retrieve English names encoded by the teacher). Means over the Bible's 21 non-English
languages; names whose English form is not unique are dropped. Short names are far from the
training domain (whole verses), so this shows how much of the distilled space carries over.

    pip install babel   # not a babelspace dependency
    HF_HUB_OFFLINE=1 python bench/ood_names.py --models e5-small output/babelspace-student
"""

from __future__ import annotations

import argparse

import numpy as np


def name_sets(langs: list[str]) -> dict[str, tuple[list[str], dict[str, list[str]]]]:
    from babel import Locale

    en = Locale("en")
    locales = {lang: Locale.parse("fil" if lang == "tl" else lang) for lang in langs}
    out = {}
    for kind in ("territories", "languages"):
        english = getattr(en, kind)
        if kind == "territories":
            codes = [c for c in english if c.isalpha() and c.upper() == c]
        else:
            codes = [c for c in english if len(c) == 2]
        codes = sorted(c for c in codes if all(c in getattr(loc, kind) for loc in locales.values()))
        names = [english[c] for c in codes]
        codes = [c for c in codes if names.count(english[c]) == 1]
        out[kind] = (
            [english[c] for c in codes],
            {lang: [getattr(loc, kind)[c] for c in codes] for lang, loc in locales.items()},
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["e5-small", "output/babelspace-student"])
    ap.add_argument("--teacher", default="minilm")
    args = ap.parse_args()

    from babelspace.data.bible import bible_languages
    from babelspace.metrics.tatoeba import top1_accuracy
    from babelspace.models.encoder import encode, load_encoder

    langs = [lang for lang in bible_languages() if lang != "en"]
    teacher = load_encoder(args.teacher)
    for kind, (english, per_lang) in name_sets(langs).items():
        print(f"{kind}: {len(english)} names x {len(langs)} languages")
        t_en = encode(teacher, english, show_progress=False)
        for spec in args.models:
            model = load_encoder(spec)
            m_en = encode(model, english, show_progress=False)
            own, tspace = [], []
            for lang in langs:
                v = encode(model, per_lang[lang], show_progress=False)
                own.append(top1_accuracy(v, m_en))
                tspace.append(top1_accuracy(v, t_en) if v.shape[1] == t_en.shape[1] else float("nan"))
            print(f"  {spec:40s} own xx>en {np.mean(own):5.1f}   xx>teacher-en {np.mean(tspace):5.1f}")


if __name__ == "__main__":
    main()
