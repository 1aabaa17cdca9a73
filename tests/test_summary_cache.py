"""The final table's baseline columns (teacher, untrained student) are cached by model content hash
and test-data fingerprint; the trained model is encoded every time."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_backends import _perturbed_copy

from babelspace.evaluation import held_out as summary
from babelspace.models import backends

EN = ["the king and the people", "god is good", "the city of the lord", "one day the rain", "a big house"]
DE = ["der könig und das volk", "gott ist gut", "die stadt des herrn", "ein tag der regen", "ein großes haus"]
FR = ["le roi et le peuple", "dieu est bon", "la ville du seigneur", "un jour la pluie", "une grande maison"]


@pytest.fixture()
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every model load the table makes, by spec."""
    seen: list[str] = []
    real = backends.load_backend_encoder

    def spy(spec: str, *args, **kwargs):
        seen.append(Path(spec).name)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(backends, "load_backend_encoder", spy)
    return seen


def _cfg(teacher: Path, student: Path, cache: Path) -> SimpleNamespace:
    return SimpleNamespace(
        teacher=str(teacher),
        student=str(student),
        langs=None,
        test_sentences=5,
        seed=0,
        max_seq_length=32,
        cache_dir=cache,
    )


def _texts(monkeypatch: pytest.MonkeyPatch, per_lang: dict[str, list[str]]) -> None:
    monkeypatch.setattr(summary, "held_out_texts", lambda *a: (list(EN), per_lang))


def test_baselines_cached_and_recomputed_when_data_or_model_change(
    tiny_model_dir: Path,
    tmp_path: Path,
    loads: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    teacher = _perturbed_copy(tiny_model_dir, tmp_path / "teacher")  # same width, other weights
    student = tmp_path / "student"
    shutil.copytree(tiny_model_dir, student)
    after = tiny_model_dir  # the "trained" model: any model works for the bookkeeping
    cfg = _cfg(teacher, student, tmp_path / "cache")
    _texts(monkeypatch, {"de": DE, "fr": FR})

    first = summary.held_out_table(cfg, after)
    assert loads == ["teacher", "student", after.name]
    assert [r["lang"] for r in first] == ["de", "fr", "mean"]

    loads.clear()
    second = summary.held_out_table(cfg, after)
    assert loads == [after.name]  # baselines came from the cache
    assert second == first

    loads.clear()
    _texts(monkeypatch, {"de": DE, "fr": [*FR[:4], "un autre jour"]})  # other test data
    summary.held_out_table(cfg, after)
    assert loads == ["teacher", "student", after.name]

    loads.clear()
    shutil.move(teacher, tmp_path / "old-teacher")  # the teacher retrained in place: same path, other weights
    _perturbed_copy(tmp_path / "old-teacher", teacher)
    changed = summary.held_out_table(cfg, after)
    assert loads == ["teacher", after.name]  # the student's vectors are still valid
    assert changed[-1]["teacher xx>en"] is not None


def test_cached_table_equals_uncached_table(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from babelspace.models.encoder import load_encoder

    per_lang = {"de": DE, "fr": FR}
    _texts(monkeypatch, per_lang)
    teacher = _perturbed_copy(tiny_model_dir, tmp_path / "teacher")
    cfg = _cfg(teacher, tiny_model_dir, tmp_path / "cache")
    summary.held_out_table(cfg, tiny_model_dir)
    cached = summary.held_out_table(cfg, tiny_model_dir)
    models = [load_encoder(str(p), max_seq_length=32) for p in (teacher, tiny_model_dir, tiny_model_dir)]
    direct = summary.before_after_table(*models, EN, per_lang)
    assert [r["lang"] for r in cached] == [r["lang"] for r in direct]
    for got, want in zip(cached, direct, strict=True):
        for col in summary.COLUMNS[1:]:
            assert got[col] == pytest.approx(want[col])


@pytest.mark.parametrize("damage", ["truncated", "wrong-shape"])
def test_damaged_cache_file_is_rebuilt_with_a_warning(
    tiny_model_dir: Path,
    tmp_path: Path,
    loads: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    damage: str,
) -> None:
    """Issue 25 item 11: a truncated cache file gave a BadZipFile traceback on every later run."""
    import numpy as np

    cfg = _cfg(tiny_model_dir, tiny_model_dir, tmp_path / "cache")
    _texts(monkeypatch, {"de": DE})
    first = summary.held_out_table(cfg, tiny_model_dir)
    (cached,) = (tmp_path / "cache" / "held-out").glob("*.npz")
    if damage == "truncated":
        cached.write_bytes(cached.read_bytes()[:100])
    else:
        np.savez(cached.with_suffix(""), en=np.zeros((2, 32)), xx_de=np.zeros((5, 32)))
    loads.clear()
    assert summary.held_out_table(cfg, tiny_model_dir) == first
    assert "cache file" in caplog.text and "encoding again" in caplog.text
    assert loads == [tiny_model_dir.name, tiny_model_dir.name]  # the baseline encoded again, once
    loads.clear()
    assert summary.held_out_table(cfg, tiny_model_dir) == first
    assert loads == [tiny_model_dir.name]  # and cached again


def test_unwritable_cache_costs_only_reencoding(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    (tmp_path / "file").write_text("x")
    cfg = _cfg(tiny_model_dir, tiny_model_dir, tmp_path / "file" / "cache")  # cannot be created
    _texts(monkeypatch, {"de": DE})
    assert [r["lang"] for r in summary.held_out_table(cfg, tiny_model_dir)] == ["de", "mean"]
    assert "cannot cache vectors" in caplog.text
