"""STS readers, Spearman and language bias."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from babelspace.errors import CorpusFormatError
from babelspace.evaluation.formats.sts import langs_from_filename, read_sts17, read_stsb
from babelspace.metrics.sts import cosine_rowwise, language_bias, sts_spearman


def test_spearman_equals_scipy_times_100() -> None:
    rng = np.random.default_rng(0)
    e1, e2 = rng.standard_normal((50, 8)), rng.standard_normal((50, 8))
    gold = rng.uniform(0, 5, 50)
    cos = np.array([a @ b / np.linalg.norm(a) / np.linalg.norm(b) for a, b in zip(e1, e2, strict=True)])
    np.testing.assert_allclose(cosine_rowwise(e1, e2), cos, rtol=1e-5, atol=1e-6)
    assert sts_spearman(e1, e2, gold) == pytest.approx(100 * spearmanr(cos, gold).statistic, abs=1e-4)


def angle_pairs(cosines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    theta = np.arccos(np.clip(cosines, -1, 1))
    e1 = np.stack([np.ones_like(theta), np.zeros_like(theta)], axis=1)
    e2 = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    return e1, e2


def test_language_bias_detects_same_language_preference() -> None:
    gold = np.linspace(0, 5, 11)
    mono = angle_pairs(0.5 + 0.09 * gold)  # perfectly ranked, high cosines
    cross = angle_pairs(0.05 + 0.09 * gold)  # perfectly ranked, every cosine lower
    res = language_bias({"en-en": (*mono, gold), "en-de": (*cross, gold)})
    assert res.per_set == pytest.approx({"en-en": 100.0, "en-de": 100.0})
    assert res.mean_per_set == pytest.approx(100.0)
    assert res.joined < 95.0
    assert res.drop == pytest.approx(res.mean_per_set - res.joined)
    unbiased = language_bias({"en-en": (*mono, gold), "de-de": (*mono, gold)})
    assert unbiased.drop == pytest.approx(0.0, abs=1e-9)


def test_langs_from_filename() -> None:
    assert langs_from_filename("data/STS.en-de.txt") == ("en", "de")
    assert langs_from_filename("ar-ar.tsv") == ("ar", "ar")
    assert langs_from_filename("sts17.en-tr.tsv") == ("en", "tr")
    assert langs_from_filename("scores.txt") is None


def test_read_sts17(tmp_path: Path) -> None:
    p = tmp_path / "STS.en-de.txt"
    p.write_text("4.2\tA man plays.\tEin Mann spielt.\n\n0.5\tA cat.\tEin Auto.\n", encoding="utf-8")
    data = read_sts17(p)
    assert (data.lang1, data.lang2) == ("en", "de")
    assert data.s1 == ["A man plays.", "A cat."] and data.s2 == ["Ein Mann spielt.", "Ein Auto."]
    np.testing.assert_allclose(data.scores, [4.2, 0.5])
    q = tmp_path / "pairs.tsv"
    q.write_text("score\ts1\ts2\n3\ta\tb\n", encoding="utf-8")
    assert read_sts17(q, langs="es-es").lang1 == "es"
    with pytest.raises(CorpusFormatError, match="cannot tell the languages"):
        read_sts17(q)


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        ("4.2\tA.\tB.\n3.0\tonly two\n", 2, "expected 3 tab-separated fields"),
        ("4.2\tA.\tB.\nhigh\tA.\tB.\n", 2, "is not a number"),
        ("4.2\tA.\t \n", 1, "empty sentence"),
    ],
)
def test_read_sts17_rejects_malformed(tmp_path: Path, content: str, line: int, reason: str) -> None:
    p = tmp_path / "en-en.tsv"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=reason) as info:
        read_sts17(p)
    assert str(info.value).startswith(f"{p}:{line}: ")


def test_read_stsb_tab_and_csv(tmp_path: Path) -> None:
    tsv = tmp_path / "sts-dev.csv"
    tsv.write_text(
        "main-captions\tMSRvid\t2012test\t0000\t5.000\tA man with a hard hat is dancing.\tA man wearing a hard hat is dancing.\n"
        "main-news\theadlines\t2013\t0001\t1.5\tShares rose.\tIt rained.\textra\tfields\n",
        encoding="utf-8",
    )
    data = read_stsb(tsv)
    assert data.s2[0] == "A man wearing a hard hat is dancing."
    np.testing.assert_allclose(data.scores, [5.0, 1.5])
    csv_path = tmp_path / "stsb.csv"
    csv_path.write_text(
        'genre,file,year,id,score,sentence1,sentence2\nnews,x,2013,1,2.5,"Hello, world.",Hi.\n',
        encoding="utf-8",
    )
    data = read_stsb(csv_path)
    assert data.s1 == ["Hello, world."] and data.scores.tolist() == [2.5]


def test_read_stsb_rejects_malformed(tmp_path: Path) -> None:
    p = tmp_path / "sts-test.csv"
    p.write_text("g\tf\t2012\t1\t3.0\tA.\tB.\ng\tf\t2012\t2\t3.0\tA.\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"sts-test.csv:2: expected 7 fields"):
        read_stsb(p)
    p.write_text("g\tf\t2012\t1\t3.0\tA.\tB.\ng\tf\t2012\t2\tx\tA.\tB.\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"sts-test.csv:2: score 'x'"):
        read_stsb(p)
