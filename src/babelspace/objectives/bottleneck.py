"""Translation through a sentence-vector bottleneck: the LASER / SONAR family.

LASER (Artetxe & Schwenk 2019, "Massively Multilingual Sentence Embeddings for Zero-Shot
Cross-Lingual Transfer and Beyond", TACL, §3) trains an encoder whose max-pooled sentence vector is
the *only* input a decoder gets to translate the sentence; SONAR (Duquenne, Schwenk & Sagot 2023,
"SONAR: Sentence-Level Multimodal and Language-Agnostic Representations", arXiv 2308.11466, §3)
does the same with a transformer encoder-decoder and adds a denoising auto-encoding loss and an MSE
between the sentence vectors of a translation pair. The MEXMA authors (Janeiro et al. 2024, arXiv
2409.12737; their OpenReview response, "Fair comparisons" and "Does KoLeo loss apply to all CLSE?")
compare MEXMA with this family, note that training it on XLM-R needs a randomly initialised
translation decoder (what this module does), and that such non-contrastive objectives would benefit
from KoLeo.

Here the student's pooled sentence vector v (what the exported model encodes: one vector per
sentence; the decoder never sees the encoder's token states) is projected to the decoder width and
is the decoder's whole memory (cross-attention over one slot). A small transformer decoder (pre-LN,
GELU, causal self-attention, learned positions) reads the target's tokens embedded with the
student's input embedding matrix and predicts the next token through the same matrix (tied, plus
its own bias), with teacher forcing. The decoder is told which language to write: a learned
target-language embedding is added to its input at every position, as LASER's decoder receives a
language embedding at every step (§3; SONAR/NLLB decoders start from a target-language tag). So
the vector need not say which language the decoder should produce, and English -> xx with one
English side paired with many languages is well posed. With a restricted target vocabulary (``decoder_vocab``, the
ids :func:`target_vocab` counts as most frequent in the training pairs) the softmax covers only
those rows of the matrix, and target tokens outside it become ``<unk>``:

    L = translate_weight · ½ (CE(dec(v(B), ℓ_A), A) + CE(dec(v(A), ℓ_B), B))      (both directions)
      + autoencode_weight · ½ (CE(dec(v(Ã), ℓ_A), A) + CE(dec(v(B̃), ℓ_B), B))    (SONAR, denoising)
      + sentence_mse_weight · MSE(v(A), v(B))                                   (SONAR)
      + koleo_weight     · ½ (KoLeo(v̂(A)) + KoLeo(v̂(B)))              (DINOv2 / MEXMA; off by default)

ℓ_X is the language of X; Ã is A with ``denoise_ratio`` of its tokens masked or dropped on the
encoder's input only (:mod:`babelspace.objectives.parts.noise`; the decoder's target is the clean A).
LASER and SONAR have no KoLeo; when it is on it is averaged over the two sides, as MEXMA's.

CE is the mean over the target's real tokens (BOS excluded, EOS included) of each direction, in
float32; under DDP the mean is over every process's tokens (the token count is summed across
processes), so N processes train as one process on the whole batch. The decoder is a submodule of the objective, so it is in ``state_dict()`` and in every
training checkpoint, but not in the exported student.

=================  ==========================================================
Inputs             parallel pairs (A = ``src``, B = ``tgt``); the student's tokenizer
                   must add a BOS/CLS and an EOS/SEP token (BERT, XLM-R do)
Outputs            ``loss``; components ``translate`` (mean of both directions),
                   ``translate_ab`` (A's vector -> B), ``translate_ba``,
                   ``autoencode``, ``sentence_mse``, ``koleo`` (unweighted),
                   ``token_acc`` (teacher-forced top-1 accuracy on translation)
=================  ==========================================================

Example::

    student = SentenceTransformer("intfloat/multilingual-e5-small")
    objective = BottleneckObjective(student, decoder_layers=2, decoder_heads=4, languages=["de", "en"])
    out = objective(objective.collate(pairs)); out["loss"].backward()
    greedy_decode(objective, student, ["In the beginning God created the heaven and the earth."], tgt_lang="de")
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.models.encoder import default_prompt, embedding_dim, tokenize
from babelspace.objectives.base import Objective
from babelspace.objectives.parts.decoder import SentenceDecoder
from babelspace.objectives.parts.gather import gather_rows, masked_means, world_scale
from babelspace.objectives.parts.koleo import koleo_loss
from babelspace.objectives.parts.masking import IGNORE_INDEX, special_or_prompt
from babelspace.objectives.parts.noise import noise_tokens

__all__ = [
    "BottleneckObjective",
    "greedy_decode",
    "target_ids",
    "target_vocab",
]

logger = logging.getLogger(__name__)


def target_ids(
    model: SentenceTransformer, texts: Sequence[str], max_length: int | None = None
) -> dict[str, torch.Tensor]:
    """Decoder targets: the texts tokenized *without* the prompt, with BOS/EOS, right-padded."""
    tok = model.tokenizer
    enc = tok(
        list(texts),
        padding=True,
        truncation=True,
        max_length=max_length or model.max_seq_length,
        return_tensors="pt",
    )
    device = model.device
    return {"input_ids": enc["input_ids"].to(device), "attention_mask": enc["attention_mask"].to(device)}


#: Pairs sampled (evenly spaced) from the training data to count target-token frequencies.
TARGET_VOCAB_PAIRS = 20_000


def target_vocab(
    model: SentenceTransformer,
    pairs: Sequence[ParallelPair],
    size: int,
    max_length: int | None = None,
    max_pairs: int = TARGET_VOCAB_PAIRS,
) -> torch.Tensor:
    """The decoder's target vocabulary: ``<unk>`` (decoder id 0), BOS, EOS, then the most frequent
    token ids of both sides of ``pairs`` (tokenized as decoder targets; ties by smaller id), at most
    ``size`` ids in all. Counts come from at most ``max_pairs`` evenly spaced pairs, so the result
    depends on the data only, and is the same on every process."""
    tok = model.tokenizer
    unk = getattr(tok, "unk_token_id", None)
    if unk is None:
        raise ValueError("a restricted decoder vocabulary needs a tokenizer with an <unk> token")
    specials = list(dict.fromkeys([int(unk), _special_id(tok, "bos"), _special_id(tok, "eos")]))
    if size <= len(specials):
        raise ValueError(f"decoder_vocab must be > {len(specials)} (<unk>, BOS, EOS), not {size}")
    if not pairs:
        raise ValueError("a restricted decoder vocabulary is counted from the training pairs: none given")
    full = model[0].auto_model.get_input_embeddings().num_embeddings
    step = max(1, -(-len(pairs) // max_pairs))
    texts = [t for p in pairs[::step] for t in (p.src, p.tgt)]
    counts = np.zeros(full, dtype=np.int64)
    for lo in range(0, len(texts), 2048):
        enc = tok(texts[lo : lo + 2048], add_special_tokens=False, truncation=True, max_length=max_length)
        flat = [i for row in enc["input_ids"] for i in row]
        counts += np.bincount(np.asarray(flat, dtype=np.int64), minlength=full)[:full]
    counts[specials] = 0
    order = np.argsort(-counts, kind="stable")[: size - len(specials)]
    return torch.tensor(specials + [int(i) for i in order if counts[i] > 0], dtype=torch.long)


def _special_id(tokenizer: Any, kind: str) -> int:
    names = ("bos_token_id", "cls_token_id") if kind == "bos" else ("eos_token_id", "sep_token_id")
    for name in names:
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise ValueError(f"the student's tokenizer has no {kind.upper()} token; the decoder needs one")


class BottleneckObjective(Objective):
    """Translation (and optionally denoising auto-encoding) from the sentence vector alone, the
    decoder told the target language (module docstring). ``languages``: the languages the decoder
    can write (every pair's ``src_lang`` and ``tgt_lang`` must be among them); None builds an
    unconditioned decoder, whose output language must then come from the vector itself.
    ``denoise_ratio``: share of the encoder's input tokens masked or dropped for auto-encoding."""

    name = "bottleneck"

    def __init__(
        self,
        student: SentenceTransformer,
        decoder_layers: int = 2,
        decoder_heads: int = 4,
        translate_weight: float = 1.0,
        autoencode_weight: float = 0.0,
        sentence_mse_weight: float = 0.0,
        koleo_weight: float = 0.0,
        decoder_dropout: float = 0.1,
        max_seq_length: int | None = None,
        decoder_vocab: torch.Tensor | None = None,
        gather_negatives: bool = False,
        languages: Sequence[str] | None = None,
        denoise_ratio: float = 0.0,
    ) -> None:
        super().__init__(student, max_seq_length)
        for label, w in (("translate", translate_weight), ("autoencode", autoencode_weight)):
            if not w >= 0:
                raise ValueError(f"{label}_weight must be >= 0, not {w}")
        if not 0.0 <= denoise_ratio < 1.0:
            raise ValueError(f"denoise_ratio must be in [0, 1), not {denoise_ratio}")
        self.denoise_ratio = float(denoise_ratio)
        self.translate_weight = float(translate_weight)
        self.autoencode_weight = float(autoencode_weight)
        self.sentence_mse_weight = float(sentence_mse_weight)
        self.koleo_weight = float(koleo_weight)
        self.gather_negatives = gather_negatives  # under DDP: KoLeo over every process's vectors
        tokenizer = student.tokenizer
        self.bos_id, self.eos_id = _special_id(tokenizer, "bos"), _special_id(tokenizer, "eos")
        self.mask_id = getattr(tokenizer, "mask_token_id", None)
        self.pad_id = int(getattr(tokenizer, "pad_token_id", None) or 0)
        self.special_ids = sorted({int(i) for i in tokenizer.all_special_ids})
        prompt = self.prompt.rstrip()
        self.prompt_ids = list(tokenizer(prompt, add_special_tokens=False)["input_ids"]) if prompt else []
        embeddings = student[0].auto_model.get_input_embeddings()
        positions = int(self.max_seq_length)
        self.decoder = SentenceDecoder(
            embedding_dim(student),
            embeddings.weight,
            decoder_layers,
            decoder_heads,
            positions,
            decoder_dropout,
            vocab_ids=decoder_vocab,
            languages=languages,
        )

    # ------------------------------------------------------------------ collate (no autograd)
    def collate(self, pairs: Sequence[ParallelPair]) -> dict[str, Any]:
        if not pairs:
            raise ValueError("the bottleneck objective needs a non-empty batch of pairs")
        texts = [p.src for p in pairs] + [p.tgt for p in pairs]
        features = self.tokenize(texts)
        batch: dict[str, Any] = {
            "features": features,
            "targets": target_ids(self.student, texts, self.max_seq_length),
            "n": len(pairs),
        }
        if self.decoder.languages:  # rows [A; B]: each written in its own side's language
            langs = [p.src_lang for p in pairs] + [p.tgt_lang for p in pairs]
            batch["langs"] = self.decoder.language_ids(langs, self.student.device)
        if self.autoencode_weight > 0 and self.denoise_ratio > 0:
            batch["noised"] = self.noised(features)
        return batch

    def noised(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The encoder's input with ``denoise_ratio`` of its tokens masked or dropped (SONAR's
        denoising auto-encoding; the decoder's targets stay clean)."""
        ids, attn = noise_tokens(
            features["input_ids"],
            features["attention_mask"],
            special_or_prompt(features["input_ids"], self.special_ids, self.prompt_ids),
            self.denoise_ratio,
            self.mask_id,
            self.pad_id,
        )
        out = {"input_ids": ids, "attention_mask": attn}
        if "token_type_ids" in features:
            out["token_type_ids"] = torch.zeros_like(ids)
        return out

    # ------------------------------------------------------------------ forward
    def token_losses(
        self, vectors: torch.Tensor, targets: dict[str, torch.Tensor], langs: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Teacher-forced CE per target token (float32) for rows conditioned on ``vectors`` (and the
        target languages ``langs``): returns (ce [N], row index [N], correct [N]) over the N real
        next-token positions. ``targets`` holds tokenizer ids; a restricted target vocabulary sees
        its own ids (``<unk>`` outside it)."""
        ids, attn = self.decoder.from_tokenizer(targets["input_ids"]), targets["attention_mask"]
        labels = ids[:, 1:].masked_fill(attn[:, 1:] == 0, IGNORE_INDEX)
        states = self.decoder.hidden(vectors, ids[:, :-1], attn[:, :-1], langs)
        selected = labels != IGNORE_INDEX
        logits = self.decoder.logits(states[selected]).float()
        gold = labels[selected]
        ce = F.cross_entropy(logits, gold, reduction="none")
        rows = torch.nonzero(selected)[:, 0]
        return ce, rows, (logits.detach().argmax(dim=-1) == gold)

    def _group_means(self, ce: torch.Tensor, rows: torch.Tensor, groups: int, n: int) -> list:
        """Mean CE of each group of ``n`` rows (None if it has no token); under DDP (training) over
        every process's tokens of that group (:func:`masked_means`)."""
        masks = [(rows >= lo) & (rows < lo + n) for lo in range(0, groups * n, n)]
        return masked_means(ce, masks, across_processes=self.training)

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        n = int(batch["n"])
        targets = batch["targets"]
        vectors = self.embed(batch["features"])
        v_a, v_b = vectors[:n], vectors[n:]
        # Rows [A; B] of the targets; translation reads the other side's vector, auto-encoding its own
        # (of the noised input when denoising). Each row is written in its own side's language.
        memory, tgt, langs = torch.cat([v_b, v_a]), targets, batch.get("langs")
        if self.autoencode_weight > 0:
            own = self.embed(batch["noised"]) if "noised" in batch else vectors
            memory = torch.cat([memory, own])
            tgt = {k: torch.cat([v, v]) for k, v in targets.items()}
            langs = None if langs is None else torch.cat([langs, langs])
        ce, rows, correct = self.token_losses(memory, tgt, langs)
        groups = self._group_means(ce, rows, len(memory) // n, n)
        zero = vectors.sum() * 0.0
        translate = 0.5 * (_or(groups[0], zero) + _or(groups[1], zero))
        autoencode = 0.5 * (_or(groups[2], zero) + _or(groups[3], zero)) if len(groups) > 2 else zero
        sentence_mse = F.mse_loss(v_a.float(), v_b.float())
        if self.gather_negatives:
            koleo = 0.5 * (koleo_loss(gather_rows(v_a)) + koleo_loss(gather_rows(v_b))) * world_scale()
        else:
            koleo = 0.5 * (koleo_loss(v_a) + koleo_loss(v_b))  # averaged over the two sides, as MEXMA
        loss = (
            self.translate_weight * translate
            + self.autoencode_weight * autoencode
            + self.sentence_mse_weight * sentence_mse
            + self.koleo_weight * koleo
        )
        nan = ce.new_tensor(float("nan"))
        trans = rows < 2 * n
        acc = correct[trans].float().mean() if bool(trans.any()) else nan
        return {
            "loss": loss,
            "translate": translate.detach(),
            "translate_ab": _or(groups[1], nan).detach(),
            "translate_ba": _or(groups[0], nan).detach(),
            "autoencode": autoencode.detach(),
            "sentence_mse": sentence_mse.detach(),
            "koleo": koleo.detach(),
            "token_acc": acc,
        }

    # ------------------------------------------------------------------ checkpoints
    def head_state(self) -> dict[str, Any]:
        """The decoder's state without the tied weight (it is the student's embedding matrix)."""
        return {k: v for k, v in super().head_state().items() if k != "decoder.output.weight"}

    def load_head_state(self, state: dict[str, Any]) -> None:
        """Load what :meth:`head_state` returned (strict about the decoder's own keys)."""
        missing, unexpected = self.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.startswith("student.") and k != "decoder.output.weight"]
        if missing or unexpected:
            raise KeyError(f"decoder state mismatch: missing {missing}, unexpected {unexpected}")


def _or(value: torch.Tensor | None, default: torch.Tensor) -> torch.Tensor:
    return default if value is None else value


@torch.no_grad()
def greedy_decode(
    objective_or_decoder: BottleneckObjective | SentenceDecoder,
    model: SentenceTransformer,
    texts: Sequence[str],
    max_len: int = 64,
    tgt_lang: str | None = None,
) -> list[str]:
    """Encode ``texts`` with ``model`` (its default prompt, the exported pooling) and generate from
    each sentence vector alone, one argmax token at a time until EOS or ``max_len`` tokens, in the
    target language ``tgt_lang`` (required by a language-conditioned decoder, refused otherwise).

    Shows what the vector retains: the decoder was trained to translate from it (and, with
    auto-encoding, to regenerate it), so its output is the trained target of that kind."""
    decoder = (
        objective_or_decoder.decoder
        if isinstance(objective_or_decoder, BottleneckObjective)
        else objective_or_decoder
    )
    if not texts:
        return []
    if decoder.languages and tgt_lang is None:
        raise ValueError(f"give the target language: the decoder writes {', '.join(decoder.languages)}")
    if not decoder.languages and tgt_lang is not None:
        raise ValueError("this decoder is not conditioned on a target language; give no tgt_lang")
    was = (model.training, decoder.training)
    model.eval()
    decoder.eval()
    try:
        prompt = default_prompt(model)
        features = tokenize(model, [prompt + t for t in texts] if prompt else list(texts))
        device = next(decoder.parameters()).device
        features = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
        vectors = model(features)["sentence_embedding"]
        langs = None if tgt_lang is None else decoder.language_ids([tgt_lang] * len(texts), device)
        ids = _greedy_ids(decoder, vectors, model.tokenizer, min(max_len, decoder.max_positions - 1), langs)
    finally:
        model.train(was[0])
        decoder.train(was[1])
    return [model.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]


def _greedy_ids(
    decoder: SentenceDecoder,
    vectors: torch.Tensor,
    tokenizer: Any,
    max_len: int,
    langs: torch.Tensor | None = None,
) -> list[list[int]]:
    specials = torch.tensor([_special_id(tokenizer, "bos"), _special_id(tokenizer, "eos")])
    bos, eos = decoder.from_tokenizer(specials.to(vectors.device)).tolist()
    rows = vectors.shape[0]
    ids = torch.full((rows, 1), bos, dtype=torch.long, device=vectors.device)
    done = torch.zeros(rows, dtype=torch.bool, device=vectors.device)
    for _ in range(max_len):
        nxt = decoder(vectors, ids, lang_ids=langs)[:, -1].argmax(dim=-1)
        nxt = nxt.masked_fill(done, eos)
        ids = torch.cat([ids, nxt.unsqueeze(1)], dim=1)
        done |= nxt == eos
        if bool(done.all()):
            break
    out = []
    eos = int(decoder.to_tokenizer(torch.tensor(eos, device=ids.device)))
    for row in decoder.to_tokenizer(ids[:, 1:]).tolist():
        out.append(row[: row.index(eos)] if eos in row else row)
    return out
