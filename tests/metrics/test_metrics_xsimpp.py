"""xsim++ hard negatives, scoring and the released-file reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from babelspace.errors import CorpusFormatError
from babelspace.evaluation.formats.xsimpp import read_xsimpp_files
from babelspace.metrics.xsimpp import NEGATIVE_TYPES, HardNegative, generate_hard_negatives, xsimpp_errors

TEXTS = [
    "I bought 3 apples in Paris yesterday.",
    "She did not go because it was raining.",
    "We met John in London after the meeting.",
    "He has two brothers and one sister.",
    "The train is late, so we will walk.",
    "They walked home.",
    "I can't see the first house.",
    "It never rains in Cairo, but it is always hot.",
]


def test_every_type_is_generated_and_never_the_original() -> None:
    negs = generate_hard_negatives(TEXTS, seed=0, max_per_type=3)
    assert {h.type for h in negs} == set(NEGATIVE_TYPES)
    originals = set(TEXTS)
    for h in negs:
        assert h.text not in originals
        assert h.text != TEXTS[h.source_index]
        assert h.type in NEGATIVE_TYPES
    pairs = [(h.source_index, h.text) for h in negs]
    assert len(pairs) == len(set(pairs))
    per = {(h.source_index, h.type) for h in negs}
    counts = {key: sum(1 for h in negs if (h.source_index, h.type) == key) for key in per}
    assert max(counts.values()) <= 3


def by(negs: list[HardNegative], index: int, kind: str) -> list[str]:
    return [h.text for h in negs if h.source_index == index and h.type == kind]


def test_specific_rules() -> None:
    negs = generate_hard_negatives(TEXTS, seed=1, max_per_type=5)
    number = by(negs, 0, "number")
    assert number and all(t.startswith("I bought ") and "3 apples" not in t for t in number)
    words = by(negs, 3, "number")
    assert any("two brothers" not in t for t in words) and any("one sister" not in t for t in words)
    ordinal = by(negs, 6, "number")
    assert ordinal and "first" not in ordinal[0] and ordinal[0].endswith(" house.")
    # entity: a capitalised, non-initial word replaced by one from *another* sentence
    entity = by(negs, 0, "entity")
    assert entity and all(any(w in t for w in ("John", "London", "Cairo")) for t in entity)
    assert not by(negs, 5, "entity")  # "They" starts the sentence: not an entity
    assert "She did not go although it was raining." in by(negs, 1, "causality")
    assert "We met John in London before the meeting." in by(negs, 2, "causality")
    assert "The train is late, but we will walk." in by(negs, 4, "causality")
    assert "She did go because it was raining." in by(negs, 1, "negation")
    assert "The train is not late, so we will walk." in by(negs, 4, "negation")
    assert "They never walked home." in by(negs, 5, "negation")
    assert "I can see the first house." in by(negs, 6, "negation")


def test_generation_is_deterministic_and_negation_can_merge_into_causality() -> None:
    assert generate_hard_negatives(TEXTS, seed=3) == generate_hard_negatives(TEXTS, seed=3)
    merged = generate_hard_negatives(TEXTS, seed=3, split_negation=False, max_per_type=5)
    assert "negation" not in {h.type for h in merged}
    assert "They never walked home." in by(merged, 5, "causality")


def test_nothing_to_perturb_gives_no_negative() -> None:
    assert generate_hard_negatives(["Hello there."]) == []
    # a negative that would equal another sentence of the set is dropped
    assert generate_hard_negatives(["He is here.", "He is not here."], max_per_type=5) == []


def test_xsimpp_errors_attribute_types() -> None:
    e = np.eye(8, dtype=np.float32)
    src = e[:4]
    tgt = e[:4].copy()
    # source 0: its number negative is closer than its target; source 1: target 2 wins ("other")
    src[0] = 0.6 * e[0] + 0.8 * e[4]
    neg = np.stack([e[4], 0.5 * e[3] + 0.5 * e[5]])
    src[1] = 0.3 * e[1] + 0.95 * e[2]
    src[2] = 0.9 * e[2] + 0.1 * e[6]
    res = xsimpp_errors(src, tgt, neg, [0, 3], ["number", "entity"], margin="absolute", k=1)
    assert res.predictions.tolist() == [4, 2, 2, 3]
    assert res.errors == 2 and res.n == 4
    assert res.error_rate == pytest.approx(50.0)
    assert res.errors_by_type["number"] == 1
    assert res.errors_by_type["other"] == 1
    assert res.errors_by_type["entity"] == 0
    assert sum(res.errors_by_type.values()) == res.errors
    assert res.error_rate_by_type["number"] == pytest.approx(25.0)
    # duplicates among the real targets count as right when texts are given
    texts = ["a", "b", "b", "c"]
    res2 = xsimpp_errors(src, tgt, neg, [0, 3], ["number", "entity"], margin="absolute", k=1, tgt_texts=texts)
    assert res2.errors == 1 and res2.errors_by_type["other"] == 0


def test_xsimpp_without_negatives_equals_xsim() -> None:
    from babelspace.metrics.xsim import xsim_errors

    rng = np.random.default_rng(0)
    src = rng.standard_normal((30, 8)).astype(np.float32)
    tgt = (src + rng.standard_normal((30, 8))).astype(np.float32)
    res = xsimpp_errors(src, tgt, np.zeros((0, 8), np.float32), [], [])
    assert res.errors == xsim_errors(src, tgt).errors


def write_files(tmp_path: Path, lines: list[str], mapping: object) -> tuple[Path, Path]:
    aug = tmp_path / "eng_Latn_augmented.devtest"
    aug.write_text("\n".join(lines) + "\n", encoding="utf-8")
    types = tmp_path / "eng_Latn_errtype.json"
    types.write_text(json.dumps(mapping, indent=1), encoding="utf-8")
    return aug, types


def test_read_xsimpp_files(tmp_path: Path) -> None:
    lines = ["He has two cats.", "She is here.", "He has six cats.", "She is not here."]
    aug, types = write_files(
        tmp_path, lines, {"2": {"source": 0, "type": "number"}, "3": {"source": 1, "type": "causality"}}
    )
    data = read_xsimpp_files(aug, types)
    assert data.targets == ["He has two cats.", "She is here."]
    assert data.negatives == [
        HardNegative("He has six cats.", 0, "number"),
        HardNegative("She is not here.", 1, "causality"),
    ]


@pytest.mark.parametrize(
    ("mapping", "reason"),
    [
        ({"9": {"source": 0, "type": "number"}}, "outside"),
        ({"x": {"source": 0, "type": "number"}}, "not a line index"),
        ({"2": {"type": "number"}}, "'source' and 'type'"),
        ({"2": {"source": 7, "type": "number"}}, "source 7"),
    ],
)
def test_read_xsimpp_files_rejects_bad_entries(tmp_path: Path, mapping: dict, reason: str) -> None:
    aug, types = write_files(tmp_path, ["a.", "b.", "c."], mapping)
    with pytest.raises(CorpusFormatError, match=reason) as info:
        read_xsimpp_files(aug, types)
    assert str(info.value).startswith(f"{types}:")
    assert info.value.line is not None


def test_read_xsimpp_files_rejects_invalid_json(tmp_path: Path) -> None:
    aug = tmp_path / "aug.txt"
    aug.write_text("a.\nb.\n", encoding="utf-8")
    types = tmp_path / "types.json"
    types.write_text('{\n "1": {"source": 0,\n "type": }\n}\n', encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=rf"{types}:3: invalid JSON"):
        read_xsimpp_files(aug, types)
