"""The bottleneck decoder told the target language (LASER §3), denoising auto-encoding (SONAR §3) on
the encoder's input only, and KoLeo off by default and averaged over the two sides."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.cli import main as cli_main
from babelspace.data.pairs import ParallelPair
from babelspace.objectives.bottleneck import BottleneckObjective, greedy_decode, target_ids
from babelspace.objectives.decoding import load_decoder
from babelspace.objectives.parts.koleo import koleo_loss
from babelspace.objectives.parts.noise import noise_tokens
from babelspace.training.config import TrainConfig
from tests.objectives.test_objectives_mexma import PAIRS, _tiny
from tests.training.test_training_trainer import DE, EN

LANGS = ["de", "en", "fr"]


def _objective(student: SentenceTransformer, seed: int = 0, **kwargs) -> BottleneckObjective:
    torch.manual_seed(seed)
    kwargs.setdefault("decoder_dropout", 0.0)
    return BottleneckObjective(student, decoder_layers=2, decoder_heads=4, **kwargs)


@pytest.fixture()
def student(tiny_nodrop_dir: Path) -> SentenceTransformer:
    return _tiny(tiny_nodrop_dir)


def test_changing_the_target_language_changes_the_logits_with_the_vector_fixed(
    student: SentenceTransformer,
) -> None:
    obj = _objective(student, languages=LANGS)
    obj.eval()
    vectors = torch.randn(3, student.get_embedding_dimension())
    ids = target_ids(student, ["the king", "god is good", "one day"])["input_ids"]
    dec = obj.decoder
    with torch.no_grad():
        de = dec(vectors, ids, lang_ids=dec.language_ids(["de"] * 3))
        fr = dec(vectors, ids, lang_ids=dec.language_ids(["fr"] * 3))
        de_again = dec(vectors, ids, lang_ids=dec.language_ids(["de"] * 3))
    torch.testing.assert_close(de, de_again)
    assert (de - fr).abs().amax(dim=-1).min() > 1e-4  # every position of every row changes
    with pytest.raises(ValueError, match="one target language per row"):
        dec(vectors, ids)
    with pytest.raises(ValueError, match="cannot write ru"):
        dec.language_ids(["ru"])
    # the language table travels in the state, so a checkpoint rebuilds it
    assert bytes(dec.lang_codes.tolist()).decode() == "de,en,fr"


def test_collate_gives_each_target_row_its_own_sides_language(student: SentenceTransformer) -> None:
    obj = _objective(student, languages=LANGS, autoencode_weight=1.0, denoise_ratio=0.0)
    pairs = [PAIRS[0], ParallelPair("god is good", "dieu est bon", "en", "fr", "x")]
    batch = obj.collate(pairs)
    assert [LANGS[i] for i in batch["langs"].tolist()] == ["en", "en", "de", "fr"]
    out = obj(batch)
    assert torch.isfinite(out["loss"]) and "noised" not in batch
    with pytest.raises(ValueError, match="cannot write ru"):
        obj.collate([ParallelPair("a", "b", "en", "ru", "y")])


def test_denoising_noises_the_encoders_input_only(student: SentenceTransformer) -> None:
    texts = [p.src for p in PAIRS] + [p.tgt for p in PAIRS]
    n = len(PAIRS)
    clean = _objective(student, languages=LANGS, autoencode_weight=1.0, denoise_ratio=0.0)
    noisy = _objective(student, languages=LANGS, autoencode_weight=1.0, denoise_ratio=0.5)
    noisy.load_state_dict(clean.state_dict())
    torch.manual_seed(1)
    batch = noisy.collate(PAIRS)
    plain = clean.collate(PAIRS)
    # the decoder's targets are the clean sentences; only the encoder's auto-encoding input changes
    for key in ("input_ids", "attention_mask"):
        torch.testing.assert_close(batch["targets"][key], plain["targets"][key])
        torch.testing.assert_close(batch["features"][key], plain["features"][key])
    assert not torch.equal(
        batch["noised"]["attention_mask"].sum(1), batch["features"]["attention_mask"].sum(1)
    ) or (not torch.equal(batch["noised"]["input_ids"], batch["features"]["input_ids"]))
    tok = student.tokenizer
    for row, ids in enumerate(batch["noised"]["input_ids"].tolist()):
        real = ids[: int(batch["noised"]["attention_mask"][row].sum())]
        assert real[0] == tok.cls_token_id and real[-1] == tok.sep_token_id  # specials kept
    assert len(texts) == 2 * n
    clean.eval()
    noisy.eval()
    with torch.no_grad():
        a, b = clean(plain), noisy(batch)
    for key in ("translate", "translate_ab", "translate_ba", "sentence_mse", "koleo"):
        torch.testing.assert_close(a[key], b[key])  # translation reads the clean vectors
    assert abs(a["autoencode"].item() - b["autoencode"].item()) > 1e-6


def test_noise_tokens_masks_and_drops_unprotected_tokens_only() -> None:
    ids = torch.tensor([[1, 10, 11, 12, 13, 14, 2, 0], [1, 20, 21, 2, 0, 0, 0, 0]])
    attn = (ids != 0).long()
    protected = (ids == 1) | (ids == 2)
    gen = torch.Generator().manual_seed(0)
    out, out_attn = noise_tokens(ids, attn, protected, 0.99, mask_id=99, pad_id=0, generator=gen)
    for row in range(2):
        real = out[row][out_attn[row].bool()].tolist()
        assert real[0] == 1 and real[-1] == 2 and all(t == 99 for t in real[1:-1])
    assert out.shape[1] < ids.shape[1]  # some were dropped, rows re-packed
    same, same_attn = noise_tokens(ids, attn, protected, 0.0, mask_id=99, pad_id=0)
    assert same is ids and same_attn is attn
    dropped, dropped_attn = noise_tokens(ids, attn, protected, 0.99, mask_id=None, pad_id=0, generator=gen)
    assert dropped[0][dropped_attn[0].bool()].tolist() == [1, 2]  # no mask token: dropped
    with pytest.raises(ValueError):
        noise_tokens(ids, attn, protected, 1.0, mask_id=99, pad_id=0)


def test_koleo_is_off_by_default_and_averaged_over_the_two_sides(student: SentenceTransformer) -> None:
    cfg = TrainConfig(objective="bottleneck")
    assert cfg.koleo_for("bottleneck") == 0.0 and cfg.koleo_for("mexma") == 0.01
    assert TrainConfig(objective="bottleneck", koleo_weight=0.2).koleo_for("bottleneck") == 0.2
    assert BottleneckObjective.__init__.__defaults__ is not None
    obj = _objective(student, languages=LANGS, koleo_weight=0.5)
    obj.eval()
    batch = obj.collate(PAIRS)
    with torch.no_grad():
        out = obj(batch)
        v = obj.embed(batch["features"])
    n = len(PAIRS)
    expected = 0.5 * (koleo_loss(v[:n]) + koleo_loss(v[n:]))
    assert out["koleo"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert out["loss"].item() == pytest.approx(out["translate"].item() + 0.5 * expected.item(), rel=1e-5)
    off = _objective(student, languages=LANGS)
    assert off.koleo_weight == 0.0


def _two_language_pairs() -> list[ParallelPair]:
    """English sentences each paired with a "de" and an "fr" rendering (fr: the German words reversed)."""
    rng = random.Random(0)
    pairs: list[ParallelPair] = []
    seen: set[str] = set()
    while len(pairs) < 16:
        idx = [rng.randrange(len(DE)) for _ in range(rng.randint(2, 4))]
        src = " ".join(EN[i] for i in idx)
        if src in seen:
            continue
        seen.add(src)
        de = " ".join(DE[i] for i in idx)
        pairs.append(ParallelPair(src, de, "en", "de", f"d:{len(pairs)}"))
        pairs.append(ParallelPair(src, " ".join(reversed(de.split())), "en", "fr", f"f:{len(pairs)}"))
    return pairs


def test_one_english_vector_decodes_into_the_language_asked(
    tiny_nodrop_dir: Path, tmp_path: Path, capsys
) -> None:
    """Overfit en->de and en->fr from the same English vectors: the target language alone then picks
    the output, through greedy_decode and through `babelspace decode --tgt-lang`."""
    student = _tiny(tiny_nodrop_dir)
    obj = _objective(student, languages=LANGS)
    pairs = _two_language_pairs()
    batch = obj.collate(pairs)
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=3e-3)
    for _ in range(120):
        out = obj(batch)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
    english = [p.src for p in pairs[::2]]
    tok = student.tokenizer

    def trip(text: str) -> str:
        return tok.decode(tok(text)["input_ids"], skip_special_tokens=True)

    de = greedy_decode(obj, student, english, max_len=12, tgt_lang="de")
    fr = greedy_decode(obj, student, english, max_len=12, tgt_lang="fr")
    de_ok = sum(d == trip(p.tgt) for d, p in zip(de, pairs[::2], strict=True))
    fr_ok = sum(f == trip(p.tgt) for f, p in zip(fr, pairs[1::2], strict=True))
    assert de_ok >= 4 and fr_ok >= 4, (de_ok, fr_ok, de[:3], fr[:3])
    with pytest.raises(ValueError, match="give the target language"):
        greedy_decode(obj, student, english[:1])
    model_dir, ckpt = tmp_path / "model", tmp_path / "out" / "checkpoints" / "step-00000150"
    ckpt.mkdir(parents=True)
    student.save(str(model_dir))
    torch.save({"objective": obj.state_dict(), "step": 150}, ckpt / "state.pt")
    assert load_decoder(_tiny(tiny_nodrop_dir), ckpt / "state.pt").languages == tuple(LANGS)
    args = ["decode", str(model_dir), "--checkpoint", str(ckpt), english[0], "--max-new-tokens", "12"]
    assert cli_main([*args, "--tgt-lang", "fr"]) == 0
    assert capsys.readouterr().out.strip() == f"{english[0]}\t->\t{fr[0]}"
    assert cli_main(args) == 2
    assert "give --tgt-lang" in capsys.readouterr().err
    assert cli_main([*args, "--tgt-lang", "ru"]) == 2
