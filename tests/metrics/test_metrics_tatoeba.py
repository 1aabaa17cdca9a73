"""Tatoeba accuracy and LASER-layout reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from babelspace.errors import CorpusFormatError, ResourceError
from babelspace.evaluation.formats.tatoeba import read_tatoeba_dir
from babelspace.metrics.tatoeba import tatoeba_accuracy


def test_accuracy_both_directions_hand_built() -> None:
    en = np.eye(4, dtype=np.float32)
    xx = np.eye(4, dtype=np.float32)
    xx[3] = [0.9, 0.0, 0.0, 0.1]  # xx 3 -> en 0 (wrong); en 3 -> xx 3 is still its nearest (0.11 vs 0)
    res = tatoeba_accuracy(xx, en)
    assert res.xx_to_en == pytest.approx(75.0)
    assert res.en_to_xx == pytest.approx(100.0)
    assert res.mean == pytest.approx(87.5)
    # en 0 now prefers xx 3 over xx 0 when xx 0 moves away
    xx[0] = [0.5, 0.5, 0.5, 0.0]
    res = tatoeba_accuracy(xx, en, backend="numpy")
    assert res.en_to_xx == pytest.approx(75.0)


def test_accuracy_rejects_unaligned() -> None:
    with pytest.raises(ValueError):
        tatoeba_accuracy(np.zeros((3, 2)), np.zeros((4, 2)))


def write_pair(d: Path, lang: str, xx: list[str], en: list[str]) -> None:
    (d / f"tatoeba.{lang}-eng.{lang}").write_text("".join(x + "\n" for x in xx), encoding="utf-8")
    (d / f"tatoeba.{lang}-eng.eng").write_text("".join(x + "\n" for x in en), encoding="utf-8")


def test_read_tatoeba_dir(tmp_path: Path) -> None:
    write_pair(tmp_path, "deu", ["Hallo.", "Danke."], ["Hello.", "Thanks."])
    write_pair(tmp_path, "fra", ["Bonjour."], ["Hello."])
    (tmp_path / "README").write_text("not a data file")
    data = read_tatoeba_dir(tmp_path)
    assert sorted(data) == ["deu", "fra"]
    assert data["deu"].xx == ["Hallo.", "Danke."] and data["deu"].en == ["Hello.", "Thanks."]
    assert list(read_tatoeba_dir(tmp_path, langs=["fra"])) == ["fra"]
    with pytest.raises(ResourceError, match="tatoeba.spa-eng.spa"):
        read_tatoeba_dir(tmp_path, langs=["spa"])


def test_read_tatoeba_dir_rejects_unequal_line_counts(tmp_path: Path) -> None:
    write_pair(tmp_path, "deu", ["Hallo.", "Danke.", "Ja."], ["Hello.", "Thanks."])
    with pytest.raises(CorpusFormatError) as info:
        read_tatoeba_dir(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'tatoeba.deu-eng.eng'}:3: has 2 lines")
