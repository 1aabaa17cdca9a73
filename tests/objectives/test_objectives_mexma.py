from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

from babelspace.data.pairs import ParallelPair
from babelspace.objectives import parse_objective_spec
from babelspace.objectives.composite import CompositeObjective
from babelspace.objectives.distillation import DistillationObjective
from babelspace.objectives.mexma import MexmaObjective, make_mexma_student
from babelspace.objectives.parts.masking import IGNORE_INDEX, mask_tokens, maskable_positions

PAIRS = [
    ParallelPair("the king of the land", "der könig von dem land", "en", "de", "t:1"),
    ParallelPair("god is good", "gott ist gut", "en", "de", "t:2"),
    ParallelPair(
        "the people in the city and the house", "das volk in der stadt und das haus", "en", "de", "t:3"
    ),
    ParallelPair("one day with the lord", "ein tag mit dem herr", "en", "de", "t:4"),
]

BIBLE_PAIRS = [
    ("In the beginning God created the heaven and the earth.", "Am Anfang schuf Gott Himmel und Erde."),
    (
        "And God said, Let there be light: and there was light.",
        "Und Gott sprach: Es werde Licht! und es ward Licht.",
    ),
    ("And God saw the light, that it was good.", "Und Gott sah, dass das Licht gut war."),
    ("And the evening and the morning were the first day.", "Da ward aus Abend und Morgen der erste Tag."),
    ("The Lord is my shepherd; I shall not want.", "Der Herr ist mein Hirte, mir wird nichts mangeln."),
    (
        "Blessed are the meek: for they shall inherit the earth.",
        "Selig sind die Sanftmütigen; denn sie werden das Erdreich besitzen.",
    ),
    ("Jesus wept.", "Und Jesus gingen die Augen über."),
    ("Love is patient and kind.", "Die Liebe ist langmütig und freundlich."),
]


def _tiny(tiny_model_dir: Path) -> SentenceTransformer:
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    vocab = tiny_model_dir.parent / "hf" / "vocab.txt"
    if len(model.tokenizer) < 10 and vocab.exists():
        # transformers 5 ignores ``vocab_file=`` in the fixture's tokenizer: rebuild it from the file.
        from transformers import BertTokenizer

        model[0].processor = BertTokenizer(vocab=str(vocab), do_lower_case=True)
    return model


@pytest.fixture()
def student(tiny_model_dir: Path) -> SentenceTransformer:
    return make_mexma_student(_tiny(tiny_model_dir))


def _objective(student: SentenceTransformer, seed: int = 0, **kwargs) -> MexmaObjective:
    torch.manual_seed(seed)
    kwargs.setdefault("head_layers", 2)
    kwargs.setdefault("head_heads", 4)
    return MexmaObjective(student, generator=torch.Generator().manual_seed(seed), **kwargs)


def _grad_norm(params) -> float:
    return float(sum(p.grad.abs().sum() for p in params if p.grad is not None))


# ---------------------------------------------------------------------------------------------- masking
def _random_batch(bsz: int = 2000, length: int = 48, vocab: int = 30000, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, vocab, (bsz, length), generator=g)
    lengths = torch.randint(3, length + 1, (bsz,), generator=g)
    pos = torch.arange(length).unsqueeze(0)
    attn = (pos < lengths.unsqueeze(1)).long()
    ids[attn == 0] = 0  # PAD
    ids[:, 0] = 2  # CLS
    ids[torch.arange(bsz), lengths - 1] = 3  # SEP
    return ids, attn


def test_masking_statistics() -> None:
    ids, attn = _random_batch()
    specials = [0, 1, 2, 3, 4]
    masked, labels = mask_tokens(
        ids,
        attn,
        mask_token_id=4,
        vocab_size=30000,
        ratio=0.4,
        special_ids=specials,
        generator=torch.Generator().manual_seed(1),
    )
    maskable = maskable_positions(ids, attn, special_ids=specials)
    selected = labels != IGNORE_INDEX
    assert not (selected & ~maskable).any(), "a special or padding position was selected"
    assert torch.equal(masked[~maskable], ids[~maskable]), "special or padding ids changed"
    assert torch.equal(labels[selected], ids[selected])
    ratio = selected.sum().item() / maskable.sum().item()
    assert ratio == pytest.approx(0.4, abs=0.005)
    n_sel = selected.sum().item()
    to_mask = (masked == 4) & selected
    changed = (masked != ids) & selected & ~to_mask
    kept = (masked == ids) & selected
    assert to_mask.sum().item() / n_sel == pytest.approx(0.8, abs=0.01)
    assert changed.sum().item() / n_sel == pytest.approx(0.1, abs=0.01)
    assert kept.sum().item() / n_sel == pytest.approx(0.1, abs=0.01)
    assert not torch.isin(masked[changed], torch.tensor(specials)).any(), "random replacement drew a special"
    assert (masked[changed] < 30000).all()


def test_masking_per_sequence_ratio_and_specials_mask() -> None:
    ids, attn = _random_batch(bsz=200, length=30, seed=3)
    special = torch.zeros_like(ids)
    special[:, 1] = 1  # e.g. a prompt token
    _, labels = mask_tokens(
        ids, attn, 4, 30000, ratio=0.5, special_tokens_mask=special, special_ids=[0, 2, 3]
    )
    assert (labels[:, 1] == IGNORE_INDEX).all()
    n = maskable_positions(ids, attn, special, [0, 2, 3]).sum(1)
    k = (labels != IGNORE_INDEX).sum(1)
    assert ((k - 0.5 * n).abs() <= 1).all(), "per-sequence count is ratio * n rounded"


def test_bernoulli_masking_draws_each_token_with_probability_ratio() -> None:
    """``selection="bernoulli"`` (the official MEXMA collator): the overall rate is the ratio, but
    a sequence's count varies as a binomial (exact selection: ratio * n within one token)."""
    ids, attn = _random_batch(bsz=2000, length=40, seed=4)
    specials = [0, 2, 3]
    maskable = maskable_positions(ids, attn, special_ids=specials)
    gen = torch.Generator().manual_seed(2)
    _, labels = mask_tokens(
        ids, attn, 4, 30000, ratio=0.4, special_ids=specials, generator=gen, selection="bernoulli"
    )
    selected = labels != IGNORE_INDEX
    assert not (selected & ~maskable).any(), "a special or padding position was selected"
    assert selected.sum().item() / maskable.sum().item() == pytest.approx(0.4, abs=0.005)
    n, k = maskable.sum(1).double(), selected.sum(1).double()
    assert ((k - 0.4 * n).abs() > 1).float().mean() > 0.3, "counts do not vary: not a per-token draw"
    # the binomial variance n p (1 - p), summed over the sequences
    assert ((k - 0.4 * n) ** 2).sum() / (n * 0.24).sum() == pytest.approx(1.0, abs=0.1)
    one = torch.tensor([[2, 50, 3, 0]])
    for seed in range(10):  # drawn again until the batch has a masked token
        _, lab = mask_tokens(
            one,
            (one != 0).long(),
            4,
            100,
            ratio=0.01,
            special_ids=specials,
            generator=torch.Generator().manual_seed(seed),
            selection="bernoulli",
        )
        assert (lab != IGNORE_INDEX).sum().item() == 1
    with pytest.raises(ValueError, match="selection"):
        mask_tokens(one, None, 4, 100, selection="binomial")


def test_mexma_mask_selection_reaches_the_collator(student: SentenceTransformer) -> None:
    for selection in ("exact", "bernoulli"):
        obj = _objective(student, mask_selection=selection)
        assert obj.mask_selection == selection
        assert (obj.collate(PAIRS)["labels"] != IGNORE_INDEX).any()
    with pytest.raises(ValueError, match="mask_selection"):
        _objective(student, mask_selection="binomial")


def test_masking_at_least_one_and_reproducible() -> None:
    ids = torch.tensor([[2, 50, 3, 0], [2, 3, 0, 0]])
    attn = (ids != 0).long()
    for seed in range(20):
        masked, labels = mask_tokens(
            ids,
            attn,
            4,
            100,
            ratio=0.01,
            special_ids=[0, 2, 3],
            generator=torch.Generator().manual_seed(seed),
        )
        assert (labels != IGNORE_INDEX).sum().item() == 1
        assert labels[0, 1].item() == 50
    a = mask_tokens(ids, attn, 4, 100, generator=torch.Generator().manual_seed(7), special_ids=[0, 2, 3])
    b = mask_tokens(ids, attn, 4, 100, generator=torch.Generator().manual_seed(7), special_ids=[0, 2, 3])
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError):
        mask_tokens(ids, attn, 4, 100, ratio=0.0)


def test_collate_never_masks_specials_or_prompt(tiny_model_dir: Path) -> None:
    model = _tiny(tiny_model_dir)
    model.prompts = {"query": "query: "}
    model.default_prompt_name = "query"
    student = make_mexma_student(model)
    assert student.default_prompt_name == "query" and student.prompts["query"] == "query: "
    obj = _objective(student, mask_ratio=0.9)
    assert obj.prompt_ids, "prompt tokens were not identified"
    batch = obj.collate(PAIRS)
    ids, labels = batch["clean"]["input_ids"], batch["labels"]
    p = len(obj.prompt_ids)
    assert torch.equal(ids[:, 1 : 1 + p], torch.tensor(obj.prompt_ids).expand(len(ids), p))
    selected = labels != IGNORE_INDEX
    assert not selected[:, : 1 + p].any()
    tok = student.tokenizer
    specials = torch.tensor([tok.cls_token_id, tok.sep_token_id, tok.pad_token_id])
    assert not (selected & torch.isin(ids, specials)).any()
    assert not (selected & (batch["clean"]["attention_mask"] == 0)).any()
    n = len(PAIRS)
    assert selected[:n].any() and selected[n:].any(), "each language has a masked token"


# ---------------------------------------------------------------------------------------------- student
def test_make_mexma_student_pools_cls(tiny_model_dir: Path) -> None:
    base = _tiny(tiny_model_dir)
    student = make_mexma_student(base)
    pooling = [m for m in student if isinstance(m, Pooling)]
    assert len(pooling) == 1 and pooling[0].pooling_mode in ("cls", ("cls",))
    assert student[0] is base[0], "the transformer is shared, not copied"
    assert make_mexma_student(student) is student
    obj = _objective(student)
    obj.eval()
    texts = ["the king of the land", "god is good and the lord is king"]
    with torch.no_grad():
        cls = obj.token_states(obj.tokenize(texts))[:, 0]
    enc = student.encode(texts, convert_to_tensor=True)
    assert torch.allclose(enc, F.normalize(cls, dim=-1), atol=1e-5)
    raw = make_mexma_student(base, normalize=False)
    assert not any(isinstance(m, Normalize) for m in raw)
    assert torch.allclose(raw.encode(texts, convert_to_tensor=True), cls, atol=1e-5)


def test_make_mexma_student_saves_cls_folder(tmp_path: Path, student: SentenceTransformer) -> None:
    student.save(str(tmp_path / "m"))
    loaded = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    pooling = [m for m in loaded if isinstance(m, Pooling)]
    assert pooling[0].pooling_mode in ("cls", ("cls",))


# ---------------------------------------------------------------------------------------------- objective
def test_head_output_is_tied_to_input_embeddings(student: SentenceTransformer) -> None:
    obj = _objective(student)
    emb = student[0].auto_model.get_input_embeddings()
    assert obj.head.output.weight is emb.weight
    assert obj.head.output.bias is not emb.weight
    assert obj.vocab_size == emb.weight.shape[0]
    ids = [id(p) for p in obj.parameters()]
    assert len(ids) == len(set(ids))
    assert "head.output.weight" not in obj.head_state()
    assert "head.output.bias" in obj.head_state()
    assert not any(k.startswith("student.") for k in obj.head_state())
    assert all(lyr.self_attn.dropout == 0.0 for lyr in obj.head.encoder.layers)
    assert obj.head.encoder.layers[0].linear1.out_features == 4 * emb.weight.shape[1]


def test_forward_components_and_total(student: SentenceTransformer) -> None:
    obj = _objective(student, koleo_weight=0.05, ce_weight=0.7, sentence_mse_weight=2.0)
    obj.eval()
    batch = obj.collate(PAIRS)
    out = obj(batch)
    assert set(out) >= {"loss", "ce", "sentence_mse", "koleo", "ce_a", "ce_b"}
    assert out["loss"].requires_grad and not out["ce"].requires_grad
    total = 0.7 * out["ce"] + 2.0 * out["sentence_mse"] + 0.05 * out["koleo"]
    assert out["loss"].item() == pytest.approx(total.item(), rel=1e-5)
    assert out["ce"].item() == pytest.approx((out["ce_a"] + out["ce_b"]).item() / 2, rel=1e-5)
    with torch.no_grad():
        cls = obj.token_states(batch["clean"])[:, 0]
    n = len(PAIRS)
    assert out["sentence_mse"].item() == pytest.approx(F.mse_loss(cls[:n], cls[n:]).item(), rel=1e-4)
    out["loss"].backward()
    assert _grad_norm(obj.head.parameters()) > 0
    assert _grad_norm(student.parameters()) > 0


def _with_other_b(batch: dict, vocab: int) -> dict:
    """The same batch with every maskable token of B's *clean* sentences replaced."""
    other = copy.deepcopy(batch)
    n = batch["n"]
    ids = other["clean"]["input_ids"]
    inner = (ids[n:] > 4) & (other["clean"]["attention_mask"][n:] == 1)
    ids[n:][inner] = 5 + (ids[n:][inner] * 7 + 3) % (vocab - 5)
    assert not torch.equal(ids, batch["clean"]["input_ids"])
    return other


@pytest.mark.parametrize("unmasking", ["cross", "mono"])
def test_head_reads_the_other_languages_clean_cls(student: SentenceTransformer, unmasking: str) -> None:
    obj = _objective(student, unmasking=unmasking)
    obj.eval()
    batch = obj.collate(PAIRS)
    n = len(PAIRS)
    seen: list[torch.Tensor] = []
    hook = obj.head.encoder.register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach().clone()))
    with torch.no_grad():
        out = obj(batch)
        clean = obj.token_states(batch["clean"])
        masked = obj.token_states(batch["masked"])
    hook.remove()
    head_in = seen[0]
    expected_ctx = torch.cat([clean[n:, 0], clean[:n, 0]]) if unmasking == "cross" else clean[:, 0]
    assert torch.allclose(head_in[:, 0], expected_ctx, atol=1e-6), "position 0 is not the expected clean CLS"
    assert torch.allclose(head_in[:, 1:], masked[:, 1:], atol=1e-6), "positions 1.. are not the masked tokens"

    # Behaviour: changing only B's clean sentence moves A's unmasking loss with cross, not with mono.
    other = _with_other_b(batch, obj.random_vocab_size)
    with torch.no_grad():
        out2 = obj(other)
    delta_a = abs(out["ce_a"].item() - out2["ce_a"].item())
    delta_b = abs(out["ce_b"].item() - out2["ce_b"].item())
    if unmasking == "cross":
        assert delta_a > 1e-6, "A's unmasking ignores B's sentence"
    else:
        assert delta_a < 1e-7, "mono unmasking of A depends on B"
        assert delta_b > 1e-6, "mono unmasking of B ignores B's own clean sentence"


def test_token_gradients_off_stops_the_token_path(student: SentenceTransformer) -> None:
    batch_obj = _objective(student)
    batch = batch_obj.collate(PAIRS)
    labels, attn = batch["labels"], batch["clean"]["attention_mask"]
    embedding = batch_obj.word_embeddings.weight
    encoder = [p for p in student[0].parameters() if p is not embedding]
    n = len(PAIRS)

    for token_gradients in (True, False):
        obj = _objective(student, token_gradients=token_gradients)
        obj.zero_grad(set_to_none=True)
        masked = obj.token_states(batch["masked"])
        cls = obj.token_states(batch["clean"])[:, 0].detach()  # close the sentence path
        logits = obj.unmasking_logits(masked, torch.cat([cls[n:], cls[:n]]), attn, labels)
        F.cross_entropy(logits, labels[labels != IGNORE_INDEX]).backward()
        if token_gradients:
            assert _grad_norm(encoder) > 0
        else:
            assert _grad_norm(encoder) == 0.0, "token-level gradient reached the encoder"
        assert _grad_norm(obj.head.encoder.parameters()) > 0
        # one path cut, not two: the tied output weight still trains the word embeddings
        assert _grad_norm([embedding]) > 0

    # The sentence path still trains the encoder: through the CLS inserted into the head ...
    obj = _objective(student, token_gradients=False, sentence_mse_weight=0.0, koleo_weight=0.0)
    obj.zero_grad(set_to_none=True)
    obj(batch)["loss"].backward()
    assert _grad_norm(encoder) > 0
    # ... and through the alignment loss.
    obj = _objective(student, token_gradients=False, ce_weight=0.0, koleo_weight=0.0)
    obj.zero_grad(set_to_none=True)
    obj(batch)["loss"].backward()
    assert _grad_norm(encoder) > 0


def test_token_gradients_off_leaves_the_tied_output_path(student: SentenceTransformer) -> None:
    """With token gradients off, the word embeddings' gradient is exactly the gradient of the tied
    output weight (the vocabulary matrix) plus that of the sentence path: the same run with the
    head untied, whose own output-weight gradient makes up the difference."""
    student.eval()  # no dropout: the tied and the untied runs see the same function
    batch = _objective(student).collate(PAIRS)
    grads = {}
    for untie in (False, True):
        obj = _objective(student, token_gradients=False, untie_output=untie, head_dropout=0.0)
        obj.eval()
        obj.zero_grad(set_to_none=True)
        obj(batch)["loss"].backward()
        grads[untie] = obj.word_embeddings.weight.grad.detach().clone()
        if untie:
            output_grad = obj.head.output.weight.grad.detach().clone()
    assert float(output_grad.abs().sum()) > 0
    torch.testing.assert_close(grads[False], grads[True] + output_grad, rtol=1e-4, atol=1e-6)


def test_mse_views(student: SentenceTransformer) -> None:
    n = len(PAIRS)
    values = {}
    for mode in ("clean", "masked", "masked_clean"):
        obj = _objective(student, mse_views=mode)
        obj.eval()
        batch = obj.collate(PAIRS)
        with torch.no_grad():
            out = obj(batch)
            clean = obj.token_states(batch["clean"])[:, 0]
            masked = obj.token_states(batch["masked"])[:, 0]
        expected = {
            "clean": F.mse_loss(clean[:n], clean[n:]),
            "masked": F.mse_loss(masked[:n], masked[n:]),
            "masked_clean": 0.5 * (F.mse_loss(masked[:n], clean[n:]) + F.mse_loss(masked[n:], clean[:n])),
        }[mode]
        assert out["sentence_mse"].item() == pytest.approx(expected.item(), rel=1e-4)
        values[mode] = out["sentence_mse"].item()
    assert values["clean"] != values["masked"]
    with pytest.raises(ValueError):
        _objective(student, mse_views="both")
    with pytest.raises(ValueError):
        _objective(student, unmasking="bilingual")


def test_head_state_round_trip(student: SentenceTransformer) -> None:
    obj = _objective(student, seed=0)
    batch = obj.collate(PAIRS)
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=1e-3)
    obj(batch)["loss"].backward()
    opt.step()
    obj.eval()
    with torch.no_grad():
        ref = obj(batch)
    state = {k: v.clone() for k, v in obj.head_state().items()}

    fresh = _objective(student, seed=123)
    fresh.eval()
    with torch.no_grad():
        assert fresh(batch)["ce"].item() != pytest.approx(ref["ce"].item(), rel=1e-4)
    fresh.load_head_state(state)
    with torch.no_grad():
        out = fresh(batch)
    for key in ("loss", "ce", "sentence_mse", "koleo"):
        assert out[key].item() == pytest.approx(ref[key].item(), rel=1e-6)
    # the full state_dict round-trips too (shared weight appears under both names)
    again = _objective(student, seed=7)
    again.load_state_dict(obj.state_dict())
    again.eval()
    with torch.no_grad():
        assert again(batch)["loss"].item() == pytest.approx(ref["loss"].item(), rel=1e-6)
    with pytest.raises(KeyError):
        fresh.load_head_state({"head.nonsense": torch.zeros(1)})


def test_training_steps_lower_the_losses_tiny(student: SentenceTransformer) -> None:
    obj = _objective(student)
    batch = obj.collate(PAIRS)
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=3e-3)
    obj.eval()
    with torch.no_grad():
        first = obj(batch)
    for _ in range(15):
        opt.zero_grad()
        obj(batch)["loss"].backward()
        opt.step()
    with torch.no_grad():
        last = obj(batch)
    assert last["ce"] < first["ce"]
    assert last["loss"] < first["loss"]


# ---------------------------------------------------------------------------------------------- composite
def test_parse_objective_spec() -> None:
    assert parse_objective_spec("mexma+distill", weights="1,0.5") == [("mexma", 1.0), ("distill", 0.5)]
    assert parse_objective_spec("contrastive") == [("contrastive", 1.0)]
    assert parse_objective_spec(" MEXMA + distill ") == [("mexma", 1.0), ("distill", 1.0)]
    for spec, weights in [
        ("mexma+labse", None),
        ("mexma+", None),
        ("mexma+mexma", None),
        ("mexma+distill", "1"),
        ("mexma", "x"),
        ("mexma", "-1"),
    ]:
        with pytest.raises(ValueError):
            parse_objective_spec(spec, weights)
    with pytest.raises(ValueError, match="choose from"):
        parse_objective_spec("labse")


def test_composite_sums_weighted_losses(student: SentenceTransformer) -> None:
    rng = np.random.default_rng(0)
    table: dict[str, np.ndarray] = {}

    def teacher(texts):
        return np.stack([table.setdefault(t, rng.standard_normal(32).astype(np.float32)) for t in texts])

    mexma = _objective(student)
    distill = DistillationObjective(student, teacher_vectors=teacher)
    comp = CompositeObjective({"mexma": mexma, "distill": distill}, weights=[1.0, 0.5])
    comp.eval()
    batch = comp.collate(PAIRS)
    assert set(batch) == {"mexma", "distill"}
    out = comp(batch)
    with torch.no_grad():
        m, d = mexma(batch["mexma"]), distill(batch["distill"])
    assert out["loss"].item() == pytest.approx(m["loss"].item() + 0.5 * d["loss"].item(), rel=1e-5)
    assert out["mexma/ce"].item() == pytest.approx(m["ce"].item(), rel=1e-5)
    assert "distill/loss" in out and "mexma/koleo" in out
    out["loss"].backward()
    assert _grad_norm(mexma.head.parameters()) > 0
    ids = [id(p) for p in comp.parameters()]
    assert len(ids) == len(set(ids))
    state = comp.head_state()
    # the head's weights, plus distillation's buffers (teacher shift, contrastive bank and the
    # exported space's offset: empty here)
    buffers = {
        "objectives.distill.teacher_shift",
        "objectives.distill.contrast_bank",
        "objectives.distill.contrast_offset",
    }
    assert state and all(k.startswith("objectives.mexma.head.") or k in buffers for k in state)
    comp.load_head_state(state)

    with pytest.raises(ValueError):
        CompositeObjective({"mexma": mexma, "distill": DistillationObjective(_tiny_copy(student), teacher)})


def _tiny_copy(model: SentenceTransformer) -> SentenceTransformer:
    return copy.deepcopy(model)


# ---------------------------------------------------------------------------------------------- e5-small
@pytest.mark.slow
def test_mexma_on_e5_small_lowers_losses(e5_small_path: Path) -> None:
    torch.manual_seed(0)
    student = make_mexma_student(SentenceTransformer(str(e5_small_path), device="cpu"))
    student.max_seq_length = 32
    obj = MexmaObjective(student, head_layers=1, head_heads=8, generator=torch.Generator().manual_seed(0))
    assert obj.mask_token_id == student.tokenizer.mask_token_id
    assert obj.head.output.weight is student[0].auto_model.get_input_embeddings().weight
    pairs = [ParallelPair(en, de, "en", "de", f"b:{i}") for i, (en, de) in enumerate(BIBLE_PAIRS[:4])]
    batch = obj.collate(pairs)
    assert batch["clean"]["input_ids"].shape[1] <= 32
    # Keep the 96M-row-parameter embedding matrix (tied to the head's output) fixed: its dense gradient
    # and AdamW update dominate a CPU step; the tiny-model tests train it.
    student[0].auto_model.get_input_embeddings().weight.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=1e-4, weight_decay=0.0)
    obj.eval()  # measure without dropout noise; train below in train mode
    with torch.no_grad():
        first = obj(batch)
    obj.train()
    for _ in range(8):
        opt.zero_grad()
        obj(batch)["loss"].backward()
        torch.nn.utils.clip_grad_norm_(obj.parameters(), 1.2)
        opt.step()
    obj.eval()
    with torch.no_grad():
        last = obj(batch)
    assert torch.isfinite(last["loss"])
    assert last["ce"] < first["ce"], (first["ce"], last["ce"])
    assert last["sentence_mse"] < first["sentence_mse"], (first["sentence_mse"], last["sentence_mse"])


# ---------------------------------------------------------------------------------------------- issue 12
def test_koleo_terms_of_the_two_languages_are_averaged(student: SentenceTransformer) -> None:
    from babelspace.objectives.parts.koleo import koleo_loss

    obj = _objective(student)
    obj.eval()
    batch = obj.collate(PAIRS)
    with torch.no_grad():
        out = obj(batch)
        cls = obj.token_states(batch["clean"])[:, 0]
    n = len(PAIRS)
    expected = 0.5 * (koleo_loss(cls[:n]) + koleo_loss(cls[n:]))  # official MEXMA: (src + trg) / 2
    assert out["koleo"].item() == pytest.approx(expected.item(), rel=1e-5)


def _attention_dropouts(model: SentenceTransformer) -> list[float]:
    return [
        m.dropout.p
        for m in model[0].auto_model.modules()
        if type(m).__name__.endswith("SelfAttention")
        and isinstance(getattr(m, "dropout", None), torch.nn.Dropout)
    ]


def test_encoder_attention_dropout_off_by_default(tiny_model_dir: Path) -> None:
    on = make_mexma_student(_tiny(tiny_model_dir))
    before = _attention_dropouts(on)
    assert before and all(p > 0 for p in before)  # the tiny model has attention dropout to turn off
    _objective(on, encoder_attention_dropout=True)
    assert _attention_dropouts(on) == before
    off = make_mexma_student(_tiny(tiny_model_dir))
    _objective(off)
    assert all(p == 0.0 for p in _attention_dropouts(off))
    for m in off[0].auto_model.modules():
        if hasattr(m, "dropout_prob"):
            assert m.dropout_prob == 0.0


def _frozen_step_changes(obj: MexmaObjective, student: SentenceTransformer) -> tuple[float, float]:
    emb = student[0].auto_model.get_input_embeddings().weight
    emb_before, out_before = emb.detach().clone(), obj.head.output.weight.detach().clone()
    opt = torch.optim.AdamW([p for p in obj.parameters() if p.requires_grad], lr=1e-2)
    obj(obj.collate(PAIRS))["loss"].backward()
    opt.step()
    return (
        float((emb.detach() - emb_before).abs().max()),
        float((obj.head.output.weight.detach() - out_before).abs().max()),
    )


def test_frozen_embeddings_leave_the_head_output_trainable(student: SentenceTransformer) -> None:
    emb = student[0].auto_model.get_input_embeddings().weight
    emb.requires_grad = False  # frozen before the objective is built: untied automatically
    obj = _objective(student)
    assert not obj.head.tied and obj.head.output.weight is not emb
    assert torch.equal(obj.head.output.weight.detach(), emb.detach())
    emb_change, out_change = _frozen_step_changes(obj, student)
    assert emb_change == 0.0 and out_change > 0.0
    assert "head.output.weight" in obj.head_state()
    # A checkpoint of the untied head loads into a fresh objective built before freezing.
    state = {k: v.clone() for k, v in obj.head_state().items()}
    emb.requires_grad = True
    fresh = _objective(student, seed=5)
    assert fresh.head.tied
    fresh.load_head_state(state)
    assert not fresh.head.tied and torch.equal(fresh.head.output.weight, state["head.output.weight"])


def test_untie_after_freezing(student: SentenceTransformer) -> None:
    obj = _objective(student)  # built while the embeddings are trainable: tied, as in official MEXMA
    assert obj.head.tied
    student[0].auto_model.get_input_embeddings().weight.requires_grad = False
    obj.untie_output_weight()
    emb_change, out_change = _frozen_step_changes(obj, student)
    assert emb_change == 0.0 and out_change > 0.0


# ---------------------------------------------------------------------------------------------- DDP
# Long sentences at even positions (rank 0's share), short ones at odd positions (rank 1's): the two
# processes hold very different numbers of masked tokens.
UNEVEN_PAIRS = [
    ParallelPair(a, b, "en", "de", f"u:{i}")
    for i, (a, b) in enumerate(
        [
            ("the king and the people of the land in the city", "der könig und das volk von dem land"),
            ("god", "gott"),
            ("one day the lord was in the house of the king", "ein tag war der herr in dem haus"),
            ("rain", "tag"),
            ("the big dog sits on the mat with the cat today", "le roi et le peuple de la ville"),
            ("hello", "haus"),
        ]
    )
]


def _ddp_objective(model_dir: str, koleo_weight: float) -> MexmaObjective:
    """A MEXMA objective without any dropout (training mode then computes the same function in one and
    in two processes), KoLeo over every process's vectors."""
    torch.manual_seed(0)
    student = make_mexma_student(_tiny(Path(model_dir)))
    student.max_seq_length = 32
    obj = MexmaObjective(
        student,
        koleo_weight=koleo_weight,
        head_layers=1,
        head_heads=2,
        head_dropout=0.0,
        gather_negatives=True,
    )
    for module in obj.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return obj.train()


def _ddp_batch(obj: MexmaObjective, rank: int, world: int) -> dict:
    """The whole batch masked once (seeded), then this process's rows (pairs ``rank::world``)."""
    torch.manual_seed(1)
    batch = obj.collate(UNEVEN_PAIRS)
    n = batch["n"]
    own = list(range(rank, n, world))
    idx = torch.tensor(own + [n + i for i in own])

    def rows(features: dict) -> dict:
        return {k: v[idx] if isinstance(v, torch.Tensor) else v for k, v in features.items()}

    return {
        "clean": rows(batch["clean"]),
        "masked": rows(batch["masked"]),
        "labels": batch["labels"][idx],
        "n": len(own),
    }


def _ddp_grads(obj: MexmaObjective) -> dict[str, torch.Tensor]:
    """Gradients of every parameter but the (large, tied) word-embedding matrix."""
    return {
        name: p.grad.detach().clone()
        for name, p in obj.named_parameters()
        if p.grad is not None and p.numel() < 5_000_000
    }


def _ddp_worker(rank: int, world: int, model_dir: str, koleo_weight: float, init: str, out: str) -> None:
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        obj = _ddp_objective(model_dir, koleo_weight)
        ddp = torch.nn.parallel.DistributedDataParallel(obj, find_unused_parameters=True)
        batch = _ddp_batch(obj, rank, world)
        ddp(batch)["loss"].backward()
        torch.save(
            {"grads": _ddp_grads(obj), "tokens": int((batch["labels"] != IGNORE_INDEX).sum())},
            f"{out}.{rank}",
        )
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.parametrize(
    ("model", "koleo_weight"),
    [("tiny_model_dir", 0.0), pytest.param("e5_small_path", 0.01, marks=pytest.mark.slow)],
)
def test_two_processes_with_uneven_masked_tokens_equal_one_process(
    request, tmp_path, model, koleo_weight
) -> None:
    """Two gloo processes holding different numbers of masked tokens give the gradients of one process
    on the whole batch: each side's CE is a mean over both processes' masked tokens (and KoLeo runs
    over both processes' vectors). Per-process token means averaged by DDP would weight rank 1's few
    tokens as much as rank 0's many. KoLeo only on the real e5-small (the tiny random model's CLS
    vectors are too close together for a stable choice of nearest neighbour)."""
    import os

    import torch.multiprocessing as mp

    model_dir = str(request.getfixturevalue(model))
    single = _ddp_objective(model_dir, koleo_weight)
    single(_ddp_batch(single, 0, 1))["loss"].backward()
    expected = _ddp_grads(single)

    out = tmp_path / "grads.pt"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_ddp_worker, args=(2, model_dir, koleo_weight, init, str(out)), nprocs=2, join=True)
    ranks = [torch.load(f"{out}.{r}", weights_only=True) for r in range(2)]
    assert ranks[0]["tokens"] > 2 * ranks[1]["tokens"] > 0  # the case the fix is for
    got = ranks[0]["grads"]
    assert got.keys() == expected.keys() and expected
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-5, atol=1e-5, msg=key)
