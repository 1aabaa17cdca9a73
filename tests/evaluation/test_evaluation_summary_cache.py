"""The final table's baseline columns (teacher, untrained student) are cached (their scores, and each
model's vectors) by model content hash and test-data fingerprint, or shipped with the package for the
default models; the trained model is encoded every time."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from babelspace.evaluation import held_out as summary
from babelspace.evaluation import held_out_baselines
from babelspace.models import backends
from babelspace.training.output import final_table
from tests.models.test_models_backends import _perturbed_copy

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
    monkeypatch.setattr(final_table, "held_out_texts", lambda *a: (list(EN), per_lang))


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

    first = final_table.held_out_table(cfg, after)
    assert loads == ["teacher", "student", after.name]
    assert [r["lang"] for r in first] == ["de", "fr", "mean", summary.CI_ROW]

    loads.clear()
    second = final_table.held_out_table(cfg, after)
    assert loads == [after.name]  # baselines came from the cache
    assert second == first

    loads.clear()
    _texts(monkeypatch, {"de": DE, "fr": [*FR[:4], "un autre jour"]})  # other test data
    final_table.held_out_table(cfg, after)
    assert loads == ["teacher", "student", after.name]

    loads.clear()
    shutil.move(teacher, tmp_path / "old-teacher")  # the teacher retrained in place: same path, other weights
    _perturbed_copy(tmp_path / "old-teacher", teacher)
    changed = final_table.held_out_table(cfg, after)
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
    final_table.held_out_table(cfg, tiny_model_dir)
    cached = final_table.held_out_table(cfg, tiny_model_dir)
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
    """A damaged shard of the vector store is reported and the store rebuilt, once."""

    cfg = _cfg(tiny_model_dir, tiny_model_dir, tmp_path / "cache")
    _texts(monkeypatch, {"de": DE})
    first = final_table.held_out_table(cfg, tiny_model_dir)
    for scores in (tmp_path / "cache" / "held-out").glob("scores-*.json"):
        scores.unlink()  # the baselines' vectors are read again
    stores = (tmp_path / "cache" / "held-out").glob("*/shard-00000.npy")
    cached = max(stores, key=lambda p: p.stat().st_size)  # the store with every language
    if damage == "truncated":
        cached.write_bytes(cached.read_bytes()[:100])
    else:
        np.save(cached, np.zeros((2, 32), dtype=np.float32))
    loads.clear()
    assert final_table.held_out_table(cfg, tiny_model_dir) == first
    assert "cached vectors in" in caplog.text and "encoding again" in caplog.text
    assert loads == [tiny_model_dir.name, tiny_model_dir.name]  # the baseline encoded again, once
    loads.clear()
    assert final_table.held_out_table(cfg, tiny_model_dir) == first
    assert loads == [tiny_model_dir.name]  # and cached again


def test_unwritable_cache_costs_only_reencoding(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    (tmp_path / "file").write_text("x")
    cfg = _cfg(tiny_model_dir, tiny_model_dir, tmp_path / "file" / "cache")  # cannot be created
    _texts(monkeypatch, {"de": DE})
    assert [r["lang"] for r in final_table.held_out_table(cfg, tiny_model_dir)] == [
        "de",
        "mean",
        summary.CI_ROW,
    ]
    assert "cannot cache vectors" in caplog.text


@pytest.fixture()
def encoded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(model folder name, number of texts) of every encoding the table makes."""
    seen: list[tuple[str, int]] = []
    load, encode = backends.load_backend_encoder, summary.encode

    def tagged(spec: str, *args, **kwargs):
        model = load(spec, *args, **kwargs)
        model.spec_name = Path(spec).name
        return model

    def spy(model, texts, **kwargs):
        seen.append((model.spec_name, len(texts)))
        return encode(model, texts, **kwargs)

    monkeypatch.setattr(backends, "load_backend_encoder", tagged)
    monkeypatch.setattr(summary, "encode", spy)
    return seen


def test_a_second_run_encodes_only_the_new_models_texts(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoded: list[tuple[str, int]]
) -> None:
    """Each model encodes each distinct text once (one call); a second run with another trained
    model encodes that model's texts and nothing else (the baselines' scores and the teacher's
    English vectors are cached)."""
    teacher = _perturbed_copy(tiny_model_dir, tmp_path / "teacher")
    student = tmp_path / "student"
    shutil.copytree(tiny_model_dir, student)
    cfg = _cfg(teacher, student, tmp_path / "cache")
    _texts(monkeypatch, {"de": DE, "fr": [*FR[:4], EN[0]]})  # one French "verse" equal to an English one
    final_table.held_out_table(cfg, tiny_model_dir)
    assert encoded == [("teacher", 14), ("student", 14), (tiny_model_dir.name, 14)]
    encoded.clear()
    retrained = _perturbed_copy(tiny_model_dir, tmp_path / "retrained")
    final_table.held_out_table(cfg, retrained)
    assert encoded == [("retrained", 14)]


def test_shipped_scores_replace_the_baselines_encoding(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoded: list[tuple[str, int]]
) -> None:
    """Scores shipped for the same model hashes, texts and settings are used as they are: a cold
    cache encodes the teacher's English verses and the trained model only, and the table is the one
    computed from the vectors; another model's hash is not matched."""
    import json

    teacher = _perturbed_copy(tiny_model_dir, tmp_path / "teacher")
    per_lang = {"de": DE, "fr": FR}
    _texts(monkeypatch, per_lang)
    computed = final_table.held_out_table(_cfg(teacher, tiny_model_dir, tmp_path / "c1"), tiny_model_dir)
    (record,) = (tmp_path / "c1" / "held-out").glob("scores-*.json")
    shipped = tmp_path / "shipped.json"
    shipped.write_text(json.dumps({"entries": [{**json.loads(record.read_text()), "models": "tiny"}]}))
    monkeypatch.setattr(held_out_baselines, "SHIPPED_BASELINES", shipped)
    encoded.clear()
    assert (
        final_table.held_out_table(_cfg(teacher, tiny_model_dir, tmp_path / "c2"), tiny_model_dir) == computed
    )
    assert encoded == [("teacher", 5), (tiny_model_dir.name, 15)]
    encoded.clear()
    other = _perturbed_copy(teacher, tmp_path / "other-student")  # a third set of weights
    final_table.held_out_table(_cfg(teacher, other, tmp_path / "c3"), tiny_model_dir)
    assert [name for name, _ in encoded] == ["teacher", "other-student", tiny_model_dir.name]


def test_mean_ci_is_the_binomial_half_width_of_the_mean() -> None:
    assert summary.mean_ci([50.0, 50.0], [100, 100]) == pytest.approx(100 * 1.959964 * (0.5 / 100) ** 0.5 / 2)
    assert summary.mean_ci([100.0, 0.0], [50, 50]) == 0.0
    rng = np.random.default_rng(0)
    p, n = rng.uniform(0.2, 0.9, 6), 400  # against the spread of simulated means
    means = [(rng.random((6, n)) < p[:, None]).mean() * 100 for _ in range(4000)]
    assert summary.mean_ci(list(p * 100), [n] * 6) == pytest.approx(1.959964 * float(np.std(means)), rel=0.08)
