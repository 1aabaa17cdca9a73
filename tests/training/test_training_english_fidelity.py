"""English fidelity of distillation: the English sample of the closed-form fit, English-only rows
encoded once per step, the English-side cosine term."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.data.indexed_pairs import IndexedCorpus
from babelspace.data.pairs import ParallelPair
from babelspace.models.encoder import make_student, projection_layer
from babelspace.models.projection_fit import fit_projection
from babelspace.objectives.distillation import DistillationObjective
from babelspace.training.setup.english_fit import english_fit_texts


def _pair(src: str, tgt: str, origin: str, tgt_lang: str = "de") -> ParallelPair:
    return ParallelPair(src, tgt, "en", tgt_lang, origin)


def test_english_fit_texts_equal_shares_distinct_and_excluded() -> None:
    bible = [_pair(f"verse {i % 50}", f"vers {i}", f"bible:{i}") for i in range(500)]  # 50 distinct
    fortunes = [_pair(f"fortune {i}", f"fortune {i}", "mono-en:fortunes:x", "en") for i in range(300)]
    names = [_pair(f"name {i}", f"Name {i}", "cldr:territories:x") for i in range(10)]
    other = [ParallelPair("hallo", "hello", "de", "en", "bible:x")]  # not English on the source side
    corpus = IndexedCorpus.from_pairs("train", bible + fortunes + names + other)
    got = english_fit_texts(corpus, 90, seed=3, exclude=["verse 0"])
    assert len(got) == len(set(got)) == 90 and got == sorted(got)
    assert "verse 0" not in got and "hallo" not in got
    kinds = {k: sum(t.startswith(k) for t in got) for k in ("verse", "fortune", "name")}
    assert kinds["name"] == 10  # a small source gives everything, the rest is shared equally
    assert kinds["verse"] == kinds["fortune"] == 40
    assert english_fit_texts(corpus, 90, seed=3, exclude=["verse 0"]) == got  # seeded
    assert english_fit_texts(corpus, 0, seed=3) == []


def test_fit_projection_english_rows_are_first_terms(tiny_model_dir, tiny_teacher_dir) -> None:
    """English rows enter the fit as the first term only: fitting pairs plus rows E equals fitting
    the same pairs plus pairs (E, E) with the rows counted twice."""
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    rng = np.random.default_rng(0)
    src, tgt, t = rng.normal(size=(20, 32)), rng.normal(size=(20, 32)), rng.normal(size=(20, 48))
    eng, t_eng = rng.normal(size=(30, 32)), rng.normal(size=(30, 48))
    shift = rng.normal(size=48)
    a = make_student(str(tiny_model_dir), teacher, projection="always")
    b = make_student(str(tiny_model_dir), teacher, projection="always")
    loss_a = fit_projection(
        a, src, tgt, t, ridge=0.5, teacher_shift=shift, prior="procrustes",
        english_features=np.vstack([eng, eng]), english_vectors=np.vstack([t_eng, t_eng]),
    )  # fmt: skip
    fit_projection(
        b, np.vstack([src, eng]), np.vstack([tgt, eng]), np.vstack([t, t_eng]),
        ridge=0.5, teacher_shift=shift, prior="procrustes",
    )  # fmt: skip
    wa, wb = projection_layer(a).linear.weight, projection_layer(b).linear.weight
    assert torch.allclose(wa, wb, atol=1e-5)
    assert torch.allclose(projection_layer(a).linear.bias, projection_layer(b).linear.bias, atol=1e-5)
    assert np.isfinite(loss_a)
    with pytest.raises(ValueError, match="english_vectors"):
        fit_projection(a, src, tgt, t, english_features=eng)


def _objective(tiny_model_dir, tiny_teacher_dir, **kwargs) -> tuple[DistillationObjective, dict]:
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    student = make_student(str(tiny_model_dir), teacher, projection="auto")
    texts = ["the king", "a house", "it rains"]
    vec = {s: np.random.default_rng(i).normal(size=48).astype(np.float32) for i, s in enumerate(texts)}
    obj = DistillationObjective(student, lambda ts: np.stack([vec[s] for s in ts]), **kwargs)
    student.eval()  # no dropout: one pass and two passes see the same vectors
    return obj, vec


def test_english_only_rows_run_through_the_student_once(tiny_model_dir, tiny_teacher_dir) -> None:
    obj, vec = _objective(tiny_model_dir, tiny_teacher_dir)
    pairs = [
        _pair("the king", "der könig", "t:1"),
        _pair("a house", "a house", "mono-en:x", "en"),
        _pair("it rains", "es regnet", "t:3"),
    ]
    batch = obj.collate(pairs)
    assert batch["target"]["input_ids"].shape[0] == 2  # the (s, s) row is not tokenized twice
    assert batch["target_rows"].tolist() == [True, False, True]
    only_en = obj.collate([pairs[1]])
    assert "target" not in only_en
    calls = []
    hook = obj.student.register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        out = obj(batch)
    hook.remove()
    assert len(calls) == 2  # sources and the two real targets
    with torch.no_grad():
        s = obj.embed(obj.tokenize([p.src for p in pairs]))
        x = obj.embed(obj.tokenize([p.tgt for p in pairs]))
    t = torch.from_numpy(np.stack([vec[p.src] for p in pairs]))
    d = ((s - t) ** 2).sum(1) + ((x - t) ** 2).sum(1)
    assert out["loss"].item() == pytest.approx(d.mean().item(), rel=1e-5)
    with torch.no_grad():
        assert obj(only_en)["mse_target"].item() == pytest.approx(obj(only_en)["mse_source"].item())


def test_english_cosine_term_is_weighted_one_minus_cosine(tiny_model_dir, tiny_teacher_dir) -> None:
    shift = np.random.default_rng(5).normal(size=48).astype(np.float32)
    kwargs = {"teacher_shift": shift, "contrast_offset": shift, "contrast_radius": 0.8}
    plain, vec = _objective(tiny_model_dir, tiny_teacher_dir, **kwargs)
    obj = DistillationObjective(plain.student, plain.teacher_vectors, english_cosine=2.0, **kwargs)
    pairs = [_pair("the king", "der könig", "t:1"), _pair("a house", "a house", "mono-en:x", "en")]
    with torch.no_grad():
        a, b = plain(plain.collate(pairs)), obj(obj.collate(pairs))
        s = obj.embed(obj.tokenize([p.src for p in pairs]))
    exported = torch.from_numpy(shift) + 0.8 * torch.nn.functional.normalize(s, dim=-1)
    t = torch.from_numpy(np.stack([vec[p.src] for p in pairs]))
    cos = torch.nn.functional.cosine_similarity(exported, t, dim=-1).mean()
    assert b["cos_source"].item() == pytest.approx(cos.item(), rel=1e-5)
    assert b["loss"].item() == pytest.approx(a["loss"].item() + 2.0 * (1 - cos.item()), rel=1e-5)
    with pytest.raises(ValueError, match="english_cosine"):
        DistillationObjective(plain.student, plain.teacher_vectors, english_cosine=-1.0)


def test_raw_vector_cache_holds_unnormalised_features(tiny_model_dir, tmp_path) -> None:
    """The projection fit's student features are cached raw, apart from normalised vectors."""
    from babelspace.models.encoder import encode, pooled_encoder
    from babelspace.training.setup.teacher_cache import TeacherCache

    model = pooled_encoder(SentenceTransformer(str(tiny_model_dir), device="cpu"))  # no Normalize
    raw = TeacherCache(model, str(tiny_model_dir), tmp_path, normalize=False)
    unit = TeacherCache(model, str(tiny_model_dir), tmp_path)
    assert raw.dir != unit.dir
    texts = ["the king", "a house"]
    got = raw.lookup(texts)
    assert np.allclose(got, encode(model, texts, normalize=False), atol=1e-5)
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0)
    again = TeacherCache(model, str(tiny_model_dir), tmp_path, normalize=False)
    assert np.array_equal(again.lookup(texts), got) and again.encoded == 0  # read back, not encoded
