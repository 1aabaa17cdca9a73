"""``babelspace score`` keeps what each row is: its languages (a bitext mixing language pairs trains
back with the right language per row), the split it was read from, and neighbourhoods that a row's
own partner does not fill twice (a background holding the bitext's sentences)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from babelspace.data.readers import load_parallel
from babelspace.mining.filters import FilterOptions
from babelspace.mining.pipeline import summary_path
from babelspace.mining.score import ScoreConfig, ScoreInputs, score_bitext, scores_path

WORDS = "hello world cat dog sits mat rain today good bad big small one two three".split()
OFF = FilterOptions(duplicates=False, identical=False)


def _sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 8)))
        if s not in out:
            out.append(s)
    return out


def test_mixed_language_pairs_train_back_with_their_own_languages(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    sents = _sentences(12)
    rows = [(s, s + " !", "en", "de" if i % 2 else "fr") for i, s in enumerate(sents)]
    tsv = tmp_path / "mix4.tsv"
    tsv.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "m4" / "k.tsv"
    s = score_bitext(
        ScoreInputs(str(tsv)), out, str(tiny_model_dir), ScoreConfig(threshold=-100), filters=OFF
    )
    assert s["kept"] == 12 and s["lang_pairs"] == {"en-de": 6, "en-fr": 6}
    assert s["kept_lang_pairs"] == {"en-de": 6, "en-fr": 6}
    corpus = load_parallel(str(out))  # what `train --data m4/k.tsv` reads
    got = {(p.src, p.tgt): (p.src_lang, p.tgt_lang) for p in corpus.pairs}
    assert got == {(a, b): (sl, tl) for a, b, sl, tl in rows}
    # a language flag does not relabel rows that carry their own languages
    again = load_parallel(str(out), tgt_lang="de")
    assert sorted(again.lang_pairs().items()) == [(("en", "de"), 6), (("en", "fr"), 6)]


def test_a_folder_is_read_at_the_split_train_reads_and_the_summary_says_which(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    folder = tmp_path / "jdir2"
    folder.mkdir()
    sents = _sentences(30)
    for name, part in (("train", sents[:20]), ("test", sents[20:])):
        lines = [json.dumps({"src": t, "tgt": t + " !", "src_lang": "en", "tgt_lang": "de"}) for t in part]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = ScoreConfig(threshold=-100)
    s = score_bitext(ScoreInputs(str(folder)), tmp_path / "a.tsv", str(tiny_model_dir), cfg, filters=OFF)
    assert (s["rows"], s["split"]) == (20, "train")
    test = ScoreInputs(str(folder), split="test")
    s = score_bitext(test, tmp_path / "b.tsv", str(tiny_model_dir), cfg, filters=OFF)
    assert (s["rows"], s["split"]) == (10, "test")
    origins = [line.split("\t")[0] for line in scores_path(tmp_path / "b.tsv").read_text().splitlines()]
    assert all("test" in o for o in origins)


def test_background_leaves_out_the_bitexts_own_sentences(tmp_path: Path, tiny_model_dir: Path) -> None:
    sents = _sentences(40, seed=3)
    rows = [(s, s + " !") for s in sents[:30]]
    tsv = tmp_path / "b.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
    bg_src, bg_tgt = tmp_path / "bg.en", tmp_path / "bg.de"
    # the bitext's own sides (with extra spacing) plus ten other sentences each
    bg_src.write_text("\n".join([f"  {a} " for a, _ in rows] + sents[30:]) + "\n", encoding="utf-8")
    bg_tgt.write_text(
        "\n".join([b.replace(" ", "  ") for _, b in rows] + sents[30:]) + "\n", encoding="utf-8"
    )
    cfg = ScoreConfig(threshold=-100)

    def scores(name: str, **bg) -> list[float]:
        inputs = ScoreInputs(str(tsv), src_lang="en", tgt_lang="de", **bg)
        s = score_bitext(inputs, tmp_path / name, str(tiny_model_dir), cfg, filters=OFF)
        lines = scores_path(tmp_path / name).read_text().splitlines()
        return s, [float(line.split("\t")[1]) for line in lines]

    s, with_own = scores("own.tsv", background_src=[bg_src], background_tgt=[bg_tgt])
    assert s["background"] == {"src": 10, "tgt": 10, "dropped_as_in_bitext": {"src": 30, "tgt": 30}}
    only_other = tmp_path / "other.en"
    only_other.write_text("\n".join(sents[30:]) + "\n", encoding="utf-8")
    other_tgt = tmp_path / "other.de"
    other_tgt.write_text("\n".join(sents[30:]) + "\n", encoding="utf-8")
    _, without = scores("other.tsv", background_src=[only_other], background_tgt=[other_tgt])
    assert with_own == without
    summary = json.loads(summary_path(tmp_path / "own.tsv").read_text())
    assert summary["background"]["dropped_as_in_bitext"] == {"src": 30, "tgt": 30}
