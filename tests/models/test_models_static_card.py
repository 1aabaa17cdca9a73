"""The static model's folder speaks to its reader (issue 43 item 4): a card that names its parent, the
number of token vectors actually distilled (not the tokenizer's size), what was measured against the
parent and that it is not a drop-in; the folder has the user's usual permissions, not mkdtemp's 0700."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from babelspace.cli import main

SENTENCES = [
    f"the {c} house number {i} is near the {w}"
    for i in range(12)
    for c, w in (("red", "lake"), ("old", "road"))
]


@pytest.fixture()
def exported(tiny_model_dir: Path, tmp_path: Path, capsys) -> tuple[Path, str]:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "static"
    old = os.umask(0o022)
    try:
        assert main(["export", str(tiny_model_dir), "--static", "--out", str(out), "--static-vocab-from",
                     str(vocab), "--static-fit", "10", "--device", "cpu"]) == 0  # fmt: skip
    finally:
        os.umask(old)
    return out, capsys.readouterr().out


def test_the_folder_has_the_users_usual_permissions(exported: tuple[Path, str]) -> None:
    out, _ = exported
    assert stat.S_IMODE(out.stat().st_mode) == 0o755  # 0o777 under umask 022; mkdtemp gave 0o700
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".static.new-")]


def test_the_card_names_parent_token_count_measurements_and_limits(
    exported: tuple[Path, str], tiny_model_dir: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    from babelspace.models.static import distilled_tokens

    out, printed = exported
    model = SentenceTransformer(str(out), device="cpu")
    n, table = distilled_tokens(model), model[0].embedding.weight.shape[0]
    assert 0 < n < table  # only the vocabulary file's tokens were distilled
    assert f"({n:,} token vectors)" in printed
    card = (out / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n") and "static-embeddings" in card.split("---")[1]
    assert f"# Static student of {tiny_model_dir}" in card
    assert (
        f"**{n:,} token vectors**" in card and f"the other {table - n:,} of the tokenizer's {table:,}" in card
    )
    assert "**Not a drop-in for its parent.**" in card
    assert "inf tokens" not in card and "model trained" not in card  # sentence-transformers' generic card
    row = next(line for line in card.splitlines() if line.startswith("| this static model |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert "× the parent" in cells[1] and 0 <= float(cells[3]) <= 100 and -1 <= float(cells[2]) <= 1
    assert "On 14 sentences" in card  # 24 sentences, 10 in the map's fit: the other 14 measured


def test_the_check_measures_what_it_says(tiny_model_dir: Path) -> None:
    """The parent against itself: cosine 1 and every sentence its own nearest vector."""
    from sentence_transformers import SentenceTransformer

    from babelspace.models.static import check_against_parent

    parent = SentenceTransformer(str(tiny_model_dir), device="cpu")
    check = check_against_parent(parent, parent, SENTENCES[:8])
    assert check.mean_cosine == pytest.approx(1.0, abs=1e-5) and check.top1 == 100.0 and check.sentences == 8
