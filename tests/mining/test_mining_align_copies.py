"""``babelspace align`` on copies: a document against itself gives one 1-1 block per line, and lines
left untranslated (a URL, an ISBN) in a real pair stay 1-1 blocks; a copy costs 0, so a merge of two
copies ties with two 1-1 blocks and must not win."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from babelspace.mining.align import align_texts
from babelspace.mining.align_cost import embedding_alignment
from babelspace.mining.align_dp import AlignConfig, block_type


def _overlaps(line_vecs: np.ndarray, max_overlap: int = 3) -> np.ndarray:
    """Overlap vectors of lines with these (unit) vectors: a concatenation is the normalised sum."""
    n, dim = line_vecs.shape
    out = np.zeros((max_overlap, n, dim), dtype=np.float32)
    for k in range(1, max_overlap + 1):
        for i in range(k, n + 1):
            v = line_vecs[i - k : i].sum(0)
            out[k - 1, i - 1] = v / np.linalg.norm(v)
    return out


def test_a_document_against_itself_is_all_one_to_one() -> None:
    rng = np.random.default_rng(0)
    for seed in range(5):
        v = np.random.default_rng(seed).normal(size=(20, 64)).astype(np.float32)
        ov = _overlaps(v / np.linalg.norm(v, axis=1, keepdims=True))
        blocks, _ = embedding_alignment(ov, ov.copy(), AlignConfig(seed=int(rng.integers(100))))
        assert [block_type(b) for b in blocks] == ["1-1"] * 20, seed
        assert blocks == [((i,), (i,)) for i in range(20)]


def test_identical_untranslated_lines_stay_one_to_one() -> None:
    """Lines 5-6, 11-12 and 17-18 (URLs, ISBNs) are the same text on both sides; the others are
    translations (close, not equal)."""
    for seed in range(5):
        rng = np.random.default_rng(seed)
        meaning = rng.normal(size=(24, 64))
        src = meaning + 0.3 * rng.normal(size=meaning.shape) / 8
        tgt = meaning + 0.3 * rng.normal(size=meaning.shape) / 8
        for i in (5, 11, 17):
            tgt[i : i + 2] = src[i : i + 2]
        unit = lambda x: (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
        blocks, _ = embedding_alignment(_overlaps(unit(src)), _overlaps(unit(tgt)), AlignConfig())
        assert blocks == [((i,), (i,)) for i in range(24)], seed


def test_cli_document_against_itself_on_a_tiny_model(tiny_model_dir: Path) -> None:
    """The reproduction: twenty lines aligned with themselves through a real encoder."""
    from babelspace.models.backends import load_backend_encoder

    words = "the a god lord king people land house city day".split()
    lines = [f"{words[i % 10]} {words[(3 * i) % 10]} {words[(7 * i + 1) % 10]} {i}" for i in range(20)]
    lines[7:9] = ["https://example.org/a/b", "ISBN 978-3-16-148410-0"]
    model = load_backend_encoder(str(tiny_model_dir))
    (doc,), _ = align_texts([(lines, list(lines))], AlignConfig(), model=model)
    assert doc.blocks == [((i,), (i,)) for i in range(20)]


def test_a_copy_scores_one_whatever_its_block() -> None:
    """The written score of a block of copies is 1 (its merge penalty is not part of the score)."""
    from babelspace.mining.align_cost import MERGE_PENALTY, block_scores

    blocks = [((0,), (0,)), ((1, 2), (1, 2)), ((3,), ())]
    assert block_scores(blocks, [0.0, 2 * MERGE_PENALTY, 0.3]) == [1.0, 1.0]
