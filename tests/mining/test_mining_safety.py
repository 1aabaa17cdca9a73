"""Mining refuses stale shards, unusable output paths and meaningless margins; --threshold auto."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from babelspace.cli import main
from babelspace.errors import BabelspaceError, ResourceError
from babelspace.mining.core import MiningConfig
from babelspace.mining.pipeline import mine_files, summary_path
from babelspace.mining.threshold import mine_embeddings, planted_bible_dev, warn_if_tiny_share
from babelspace.retrieval.knn import NEIGHBOURHOOD_FLOOR, margin_candidates
from babelspace.vectors.shards import ArrayMatrix

SENTENCES = [
    f"the {w} of the {v} is {x}" for w in ("king", "city") for v in ("god", "land") for x in ("good", "big")
]


def _lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _retrain_in_place(model_dir: Path) -> None:
    """Same file, same size, other weights: negate every float32 value of model.safetensors."""
    (weights,) = model_dir.rglob("model.safetensors")
    raw = bytearray(weights.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    for name, info in json.loads(raw[8 : 8 + n]).items():
        if name != "__metadata__" and info["dtype"] == "F32":
            start, end = (8 + n + o for o in info["data_offsets"])
            raw[start:end] = (np.frombuffer(bytes(raw[start:end]), dtype=np.float32) * -1.5).tobytes()
    weights.write_bytes(bytes(raw))


def test_shards_of_a_model_changed_at_the_same_path_are_refused(tmp_path, tiny_model_dir) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    src, tgt = _lines(tmp_path / "s.txt", SENTENCES), _lines(tmp_path / "t.txt", SENTENCES[::-1])
    work = tmp_path / "w"
    first = mine_files(src, tgt, tmp_path / "a.tsv", str(model), workdir=work)
    assert first["encoding"]["src"]["encoded"] == 1 and "@" in first["model_identity"]
    _retrain_in_place(model)
    with pytest.raises(ResourceError, match=r"another version of model .*its weights changed.*new --workdir"):
        mine_files(src, tgt, tmp_path / "b.tsv", str(model), workdir=work)


def test_k_larger_than_the_corpus_is_clipped_loudly_and_recorded(tmp_path, tiny_model_dir, caplog) -> None:
    src = _lines(tmp_path / "s.txt", SENTENCES[:3])
    tgt = _lines(tmp_path / "t.txt", SENTENCES[3:8])
    with caplog.at_level(logging.WARNING):
        summary = mine_files(
            src, tgt, tmp_path / "o.tsv", str(tiny_model_dir), MiningConfig(k=4, threshold=1.06)
        )
    assert summary["k"] == 3 and summary["k_requested"] == 4
    assert "--k 4 is larger than the corpus (3 source, 5 target sentences): using k=3" in caplog.text
    assert json.loads(summary_path(tmp_path / "o.tsv").read_text())["k"] == 3
    caplog.clear()  # auto: the run and its decoys (halves of each side) share k, said once
    with caplog.at_level(logging.WARNING):
        summary = mine_files(src, tgt, tmp_path / "a.tsv", str(tiny_model_dir), MiningConfig(k=4))
    assert summary["k"] == 1 and summary["k_requested"] == 4
    assert caplog.text.count("--k 4 is larger") == 1 and "the run and its decoys use k=1" in caplog.text


def _three_by_five() -> tuple[np.ndarray, np.ndarray]:
    """Three sources and five targets, all nearly orthogonal; source 0 and target 0 at cosine ~0.058."""
    rng = np.random.default_rng(0)
    basis, _ = np.linalg.qr(rng.normal(size=(64, 64)))
    src, tgt = basis[:3].copy(), basis[3:8].copy()
    tgt[0] = 0.058 * src[0] + np.sqrt(1 - 0.058**2) * tgt[0]
    return src.astype(np.float32), tgt.astype(np.float32)


def test_small_neighbourhoods_get_a_floor_so_a_near_orthogonal_pair_is_rejected() -> None:
    src, tgt = _three_by_five()
    result = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig(k=4, threshold=1.06))
    assert result.k == 3
    assert len(result.pairs) == 0  # without the floor the 0.058 pair scored far above 1.06
    fwd = src @ tgt.T
    ids = np.argsort(-fwd, axis=1)[:, :3]
    sims = np.take_along_axis(fwd, ids, axis=1)
    bids = np.argsort(-fwd.T, axis=1)[:, :3]
    bsims = np.take_along_axis(fwd.T, bids, axis=1)
    unfloored = margin_candidates(sims, ids, bsims, bids, "ratio", "max")
    floored = margin_candidates(sims, ids, bsims, bids, "ratio", "max", k=4)
    assert unfloored.scores.max() > 1.06
    assert floored.scores.max() <= 0.06 / NEIGHBOURHOOD_FLOOR + 1e-6


def _run_cli(argv: list[str]) -> int:
    return main(argv)


def test_out_under_a_file_fails_before_any_work(tmp_path, tiny_model_dir, capsys) -> None:
    src = _lines(tmp_path / "s.txt", SENTENCES)
    (tmp_path / "afile").write_text("x")
    rc = _run_cli(["mine", "--src", str(src), "--tgt", str(src), "--model", str(tiny_model_dir),
                   "--out", str(tmp_path / "afile" / "o.tsv"), "--no-progress"])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert "--out" in err and "afile is a file, not a folder" in err and "Traceback" not in err


def test_out_that_is_a_folder_fails_before_any_work(tmp_path, tiny_model_dir, capsys) -> None:
    src = _lines(tmp_path / "s.txt", SENTENCES)
    (tmp_path / "adir").mkdir()
    rc = _run_cli(["mine", "--src", str(src), "--tgt", str(src), "--model", str(tiny_model_dir),
                   "--out", str(tmp_path / "adir"), "--no-progress"])  # fmt: skip
    assert rc == 2
    assert "--out" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "s.txt"]  # no adir.tmp, no adir.work


def test_threshold_is_auto_unless_a_number_is_given() -> None:
    with pytest.raises(BabelspaceError, match="number or 'auto'"):
        MiningConfig(threshold="high")
    with pytest.raises(BabelspaceError, match="--src-lang 'english' is not a language code"):
        MiningConfig(src_lang="english", tgt_lang="de")
    assert MiningConfig(threshold="auto").threshold == "auto"  # no language pair needed
    assert MiningConfig(src_lang="en", tgt_lang="de").threshold == "auto"
    assert MiningConfig(src_lang="en", tgt_lang="de", threshold=1.06).threshold == 1.06


def test_planted_bible_dev_has_aligned_gold_and_unpaired_noise() -> None:
    from babelspace.data.bible import bible_verses

    src, tgt, gold = planted_bible_dev("en", "de")
    en, de = bible_verses("en", "dev"), bible_verses("de", "dev")
    by_text = {v: k for k, v in en.items()}
    de_key = {v: k for k, v in de.items()}
    assert len(gold) > 50 and len(src) == len(tgt) == 2 * len(gold)
    assert all(by_text[src[s]] == de_key[tgt[t]] for s, t in gold)
    gold_src = {s for s, _ in gold}
    de_keys = {de_key[t] for t in tgt}
    assert all(by_text[src[i]] not in de_keys for i in range(len(src)) if i not in gold_src)


def test_tiny_share_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        assert warn_if_tiny_share(4, 400, 1.06) == 0.01
    assert "keeps 4 of 400 one-to-one candidates (1.0%)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        warn_if_tiny_share(300, 400, 1.06)
    assert caplog.text == ""


@pytest.mark.slow
def test_auto_threshold_with_e5_small_recovers_planted_pairs(tmp_path) -> None:
    """Real model: the auto threshold (decoys of the corpus itself, target precision 0.9) keeps planted
    Bible *test* verse pairs hidden among unrelated verses precisely, more than LASER's 1.06, and its
    interval holds the kept pairs' precision."""
    from babelspace.data.bible import bible_verses

    en, de = bible_verses("en", "test"), bible_verses("de", "test")
    keys = sorted(set(en) & set(de))[:200]
    gold, noise_en, noise_de = keys[:40], keys[40:120], keys[120:200]
    src = _lines(tmp_path / "en.txt", [en[k] for k in gold + noise_en])
    tgt = _lines(tmp_path / "de.txt", [de[k] for k in noise_de + gold])
    auto = mine_files(
        src,
        tgt,
        tmp_path / "auto.tsv",
        "e5-small",
        MiningConfig(src_lang="en", tgt_lang="de", check_recall=True),
    )
    assert auto["threshold_source"].startswith("auto: target precision 90%")  # the default
    assert auto["threshold"] < 1.06 and auto["estimated_recall"] is not None
    gold_pairs = {(en[k], de[k]) for k in gold}

    def hits(name: str) -> tuple[int, int]:
        rows = [r.split("\t") for r in (tmp_path / name).read_text().splitlines()]
        return sum((r[1], r[2]) in gold_pairs for r in rows), len(rows)

    work = tmp_path / "auto.work"
    mine_files(src, tgt, tmp_path / "fixed.tsv", "e5-small", MiningConfig(threshold=1.06), workdir=work)
    (auto_hits, auto_kept), (fixed_hits, _) = hits("auto.tsv"), hits("fixed.tsv")
    # measured: auto kept 18 of the 40 planted pairs (the interval's low end, monolingual verse
    # decoys, is the pessimistic one on verses: repeated formulae); precision and 1.06 as asserted
    assert auto_hits >= 15 and auto_hits / auto_kept >= 0.9 and auto_hits > fixed_hits, (
        auto_hits,
        auto_kept,
        fixed_hits,
    )
    low, high = auto["precision_interval"]
    assert low - 0.05 <= auto_hits / auto_kept <= high + 0.05
