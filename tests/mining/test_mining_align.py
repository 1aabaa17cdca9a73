"""``babelspace align``: the DP against brute force, gold recovered from synthetic embeddings (merges
and deletions), the band against the exact search, Gale-Church on a known case, the CLI end to end on
a tiny model, and bad input (empty documents, one side empty, bytes that are not UTF-8, lines longer
than the window, unpaired folders)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from babelspace.cli import main
from babelspace.mining.align_cost import embedding_alignment
from babelspace.mining.align_dp import AlignConfig, AlignError, Band, alignment_types, dp_align, path_through
from babelspace.mining.gale_church import gale_church_alignment

# ----------------------------------------------------------------------------- synthetic documents


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _overlaps(
    lines: list[list[int]], units: np.ndarray, rng: np.random.Generator, noise: float = 0.3
) -> np.ndarray:
    """Overlap vectors of a document whose line ``i`` says the meaning units ``lines[i]``: each line's
    vector is its units summed plus noise of its own (a translation is close, not equal), and a
    concatenation's the sum of its lines', as an encoder sees it."""
    dim = units.shape[1]
    line_vecs = [units[line].sum(0) + noise * rng.normal(size=dim) / np.sqrt(dim) for line in lines]
    out = np.zeros((3, len(lines), dim), dtype=np.float32)
    for k in range(1, 4):
        for i in range(k, len(lines) + 1):
            out[k - 1, i - 1] = _unit(np.sum(line_vecs[i - k : i], axis=0))
    return out


def _document_pair(n_blocks: int, seed: int, p_merge: float = 0.2) -> tuple:
    """Two documents and their gold alignment: ``n_blocks`` blocks, each 1-1, or with probability
    ``p_merge`` a 1-2 or 2-1 (a sentence said in two on the other side)."""
    rng = np.random.default_rng(seed)
    src: list[list[int]] = []
    tgt: list[list[int]] = []
    gold = []
    unit = 0
    for _ in range(n_blocks):
        kind = rng.choice(["1-2", "2-1"]) if rng.random() < p_merge else "1-1"
        one, two = [unit, unit + 1], [[unit], [unit + 1]]
        left, right = (
            ([one], two) if kind == "1-2" else (two, [one]) if kind == "2-1" else ([[unit]], [[unit]])
        )
        gold.append(
            (tuple(range(len(src), len(src) + len(left))), tuple(range(len(tgt), len(tgt) + len(right))))
        )
        src += left
        tgt += right
        unit += 1 if kind == "1-1" else 2
    units = _unit(rng.normal(size=(unit, 48)))
    return _overlaps(src, units, rng), _overlaps(tgt, units, rng), gold


def test_exact_gold_recovered_with_merges() -> None:
    ov0, ov1, gold = _document_pair(50, seed=3)
    blocks, costs = embedding_alignment(ov0, ov1, AlignConfig())
    assert blocks == gold
    kinds = {(len(s), len(t)) for s, t in blocks}
    assert {(1, 1), (1, 2), (2, 1)} <= kinds  # the document has merges on both sides, and they are found
    assert all(c < 0.5 for c in costs)


def test_a_sentence_without_counterpart_is_a_deletion() -> None:
    rng = np.random.default_rng(0)
    units = _unit(rng.normal(size=(23, 32)))
    # source line 7 is a long sentence (three meaning units) the target leaves out
    src = [[i] for i in range(7)] + [[20, 21, 22]] + [[i] for i in range(7, 20)]
    tgt = [[i] for i in range(20)]
    blocks, _ = embedding_alignment(_overlaps(src, units, rng), _overlaps(tgt, units, rng), AlignConfig())
    assert ((7,), ()) in blocks
    assert sum(1 for s, t in blocks if s and t) == 20


def test_band_search_equals_exact_search_on_a_long_document() -> None:
    ov0, ov1, gold = _document_pair(400, seed=5)
    exact, _ = embedding_alignment(ov0, ov1, AlignConfig(max_full_dp=10_000))
    banded, _ = embedding_alignment(ov0, ov1, AlignConfig(max_full_dp=40))  # two levels of coarsening
    assert banded == exact
    assert sum(b in gold for b in exact) >= 0.98 * len(gold)


def test_alignment_is_deterministic_for_a_seed() -> None:
    ov0, ov1, _ = _document_pair(40, seed=1)
    a = embedding_alignment(ov0, ov1, AlignConfig(seed=4))
    b = embedding_alignment(ov0, ov1, AlignConfig(seed=4))
    assert a == b


# ----------------------------------------------------------------------------- the DP itself


def _brute_force(costs: dict, n0: int, n1: int) -> float:
    """The least total cost over every monotone block path, by plain recursion."""

    @functools.cache
    def best(i: int, j: int) -> float:
        if i == j == 0:
            return 0.0
        options = [best(i - a, j - b) + costs[(a, b)][i, j] for a, b in costs if i >= a and j >= b]
        return min(options)

    return best(n0, n1)


@pytest.mark.parametrize("seed", range(6))
def test_dp_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n0, n1 = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    types = alignment_types(5)
    table = {t: rng.random((n0 + 1, n1 + 1)) * (t[0] + t[1]) for t in types}
    blocks, block_costs = dp_align(n0, n1, types, lambda a, b, i, js: table[(a, b)][i, js])
    assert sum(block_costs) == pytest.approx(_brute_force(table, n0, n1))
    # the blocks cover both documents in order and their costs are the table's
    assert [i for s, _ in blocks for i in s] == list(range(n0))
    assert [j for _, t in blocks for j in t] == list(range(n1))
    at = [
        (sum(len(s) for s, _ in blocks[: k + 1]), sum(len(t) for _, t in blocks[: k + 1]))
        for k in range(len(blocks))
    ]
    for (s, t), (i, j), c in zip(blocks, at, block_costs, strict=True):
        assert c == pytest.approx(table[(len(s), len(t))][i, j])


def test_band_around_a_path_holds_the_path() -> None:
    blocks = [((0,), (0, 1)), ((1,), ()), ((2, 3), (2,)), ((), (3,))]
    path = path_through(blocks, 4, 4)
    assert path[0] == (0, 0) and path[-1] == (4, 4)
    assert all(abs(x1 - x0) + abs(y1 - y0) == 1 for (x0, y0), (x1, y1) in zip(path, path[1:], strict=False))
    band = Band.around(path, 4, 4, width=0)
    assert all(band.lo[x] <= y <= band.hi[x] for x, y in path)


def test_gale_church_known_case() -> None:
    cfg = AlignConfig(method="gale-church")
    # two short source sentences that together are as long as the first target one: a 2-1 block
    blocks, _ = gale_church_alignment([20, 21, 40], [41, 40], cfg)
    assert blocks == [((0, 1), (0,)), ((2,), (1,))]
    blocks, _ = gale_church_alignment([30, 50, 10, 70], [31, 48, 11, 72], cfg)
    assert blocks == [((i,), (i,)) for i in range(4)]
    # the length ratio is the document's own: a target side three times shorter aligns the same way
    blocks, _ = gale_church_alignment([60, 30, 30, 90], [20, 20, 30], cfg)
    assert blocks == [((0,), (0,)), ((1, 2), (1,)), ((3,), (2,))]


def test_config_rejects_bad_settings() -> None:
    with pytest.raises(AlignError, match="--max-size"):
        AlignConfig(max_size=1)
    with pytest.raises(AlignError, match="--method"):
        AlignConfig(method="bleualign")
    with pytest.raises(AlignError, match="--deletion-percentile"):
        AlignConfig(deletion_percentile=1.5)


# ----------------------------------------------------------------------------- the command

EN = [
    "the king was in the house.",
    "the lord is good.",
    "the dog sits on the mat. the cat sits too.",
    "hello world",
]
DE = ["der könig war im haus.", "gott ist gut.", "der hund sitzt.", "die katze sitzt auch.", "hallo welt"]


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return path


def test_cli_end_to_end_on_a_tiny_model(tmp_path: Path, tiny_model_dir: Path, capsys) -> None:
    from babelspace.data.mined import is_mined_file, read_mined

    _write(tmp_path / "en" / "a.txt", EN)
    _write(tmp_path / "de" / "a.txt", DE)
    _write(tmp_path / "en" / "b.txt", EN[:2])
    _write(tmp_path / "de" / "b.txt", DE[:2])
    _write(tmp_path / "en" / "empty.txt", [])
    _write(tmp_path / "de" / "empty.txt", ["", "  "])
    _write(tmp_path / "en" / "half.txt", EN)
    _write(tmp_path / "de" / "half.txt", [])
    out = tmp_path / "out" / "aligned.tsv"
    args = ["align", "--src", str(tmp_path / "en"), "--tgt", str(tmp_path / "de"), "--out", str(out)]
    args += ["--model", str(tiny_model_dir), "--tgt-lang", "de", "--max-seq-length", "8", "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "2/4 pairs aligned (skipped 1 both sides empty, 1 one side empty)" in printed
    summary = json.loads((tmp_path / "out" / "aligned.summary.json").read_text())
    assert summary["documents"]["skipped"] == {"both sides empty": 1, "one side empty": 1}
    assert summary["truncated"]["window_tokens"] == 8 and summary["truncated"]["lines"] > 0
    assert "encoded from their first 8 tokens" in printed
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == summary["pairs"] and all(len(r) == 5 for r in rows)
    assert {r[1].rsplit(":", 1)[0] for r in rows} == {str(tmp_path / "en" / n) for n in ("a.txt", "b.txt")}
    # what babelspace train --data reads
    assert is_mined_file(out)
    corpus = read_mined(out)
    assert len(corpus.pairs) == summary["pairs"] and corpus.pairs[0].tgt_lang == "de"


def test_cli_pairs_list_and_gale_church(tmp_path: Path, capsys) -> None:
    _write(tmp_path / "docs" / "en.txt", EN)
    _write(tmp_path / "docs" / "de.txt", DE)
    _write(tmp_path / "list.tsv", ["docs/en.txt\tdocs/de.txt"])
    out = tmp_path / "gc.tsv"
    assert (
        main(["align", "--pairs", str(tmp_path / "list.tsv"), "--out", str(out), "--method", "gale-church"])
        == 0
    )
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r[2].rsplit(":", 1)[1] for r in rows] == [
        "1",
        "2",
        "3-4",
        "5",
    ]  # the split German sentence is a 1-2
    assert "no --tgt-lang given" in capsys.readouterr().out


def test_cli_bad_utf8_names_file_and_line(tmp_path: Path, capsys) -> None:
    src = _write(tmp_path / "en.txt", EN)
    tgt = tmp_path / "de.txt"
    tgt.write_bytes(
        "der könig\n".encode() + "gott ist gut\n".encode("latin-1") + "straße\n".encode("latin-1")
    )
    args = [
        "align",
        "--src",
        str(src),
        "--tgt",
        str(tgt),
        "--out",
        str(tmp_path / "o.tsv"),
        "--method",
        "gale-church",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{tgt}:3: invalid utf-8" in err and "--skip-bad-lines" in err
    assert not list(tmp_path.glob("o.tsv*"))  # neither output nor a half-written temporary file
    assert main([*args, "--skip-bad-lines"]) == 0
    summary = json.loads((tmp_path / "o.summary.json").read_text())
    assert summary["sentences"]["tgt_bad_lines"] == 1 and summary["sentences"]["tgt"] == 2


def test_cli_refuses_unpaired_folders_and_missing_model(tmp_path: Path, capsys) -> None:
    _write(tmp_path / "en" / "a.txt", EN)
    _write(tmp_path / "en" / "b.txt", EN)
    _write(tmp_path / "de" / "a.txt", DE)
    out = str(tmp_path / "o.tsv")
    assert main(["align", "--src", str(tmp_path / "en"), "--tgt", str(tmp_path / "de"), "--out", out]) == 2
    assert "have no file of the same name" in capsys.readouterr().err
    src, tgt = str(tmp_path / "en" / "a.txt"), str(tmp_path / "de" / "a.txt")
    assert main(["align", "--src", src, "--tgt", tgt, "--out", out]) == 2
    assert "needs --model" in capsys.readouterr().err
    assert main(["align", "--src", src, "--tgt", str(tmp_path / "de"), "--out", out]) == 2
    assert "both be files or both be folders" in capsys.readouterr().err
