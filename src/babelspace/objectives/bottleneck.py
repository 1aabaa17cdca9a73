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
its own bias), with teacher forcing:

    L = translate_weight · ½ (CE(dec(v(B)), A) + CE(dec(v(A)), B))        (both directions)
      + autoencode_weight · ½ (CE(dec(v(A)), A) + CE(dec(v(B)), B))      (SONAR)
      + align_weight     · MSE(v(A), v(B))                              (SONAR)
      + koleo_weight     · (KoLeo(v̂(A)) + KoLeo(v̂(B)))                   (DINOv2 / MEXMA)

CE is the mean over the target's real tokens (BOS excluded, EOS included) of each direction, in
float32. The decoder is a submodule of the objective, so it is in ``state_dict()`` and in every
training checkpoint, but not in the exported student.

=================  ==========================================================
Inputs             parallel pairs (A = ``src``, B = ``tgt``); the student's tokenizer
                   must add a BOS/CLS and an EOS/SEP token (BERT, XLM-R do)
Outputs            ``loss``; components ``translate`` (mean of both directions),
                   ``translate_ab`` (A's vector -> B), ``translate_ba``,
                   ``autoencode``, ``align``, ``koleo`` (unweighted),
                   ``token_acc`` (teacher-forced top-1 accuracy on translation)
=================  ==========================================================

Example::

    student = SentenceTransformer("intfloat/multilingual-e5-small")
    objective = BottleneckObjective(student, decoder_layers=2, decoder_heads=4)
    out = objective(objective.collate(pairs)); out["loss"].backward()
    greedy_decode(objective, student, ["In the beginning God created the heaven and the earth."])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.encoder import default_prompt, embedding_dim
from babelspace.objectives.base import Objective
from babelspace.objectives.koleo import koleo_loss
from babelspace.objectives.masking import IGNORE_INDEX

__all__ = ["BottleneckObjective", "SentenceDecoder", "greedy_decode", "target_ids"]

logger = logging.getLogger(__name__)


class SentenceDecoder(torch.nn.Module):
    """Transformer decoder conditioned on one sentence vector per row.

    The memory is ``Linear(vector_dim -> width)(v)``: one slot, so the decoder's only view of the
    source is the sentence vector. Token embeddings and the output projection share ``tied_weight``
    (the student's input embedding matrix, [V, width]); the output bias is the decoder's own.
    ``arch`` (a buffer: layers, heads, max positions) lets a checkpoint rebuild the decoder."""

    def __init__(
        self,
        vector_dim: int,
        tied_weight: torch.nn.Parameter,
        num_layers: int = 2,
        num_heads: int = 4,
        max_positions: int = 512,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        vocab, width = tied_weight.shape
        if num_layers < 1:
            raise ValueError(f"decoder_layers must be >= 1, not {num_layers}")
        if num_heads < 1 or width % num_heads:
            raise ValueError(f"decoder width {width} is not divisible by decoder_heads={num_heads}")
        device = tied_weight.device
        self.memory = torch.nn.Linear(vector_dim, width, device=device)
        self.positions = torch.nn.Embedding(max_positions, width, device=device)
        torch.nn.init.normal_(self.positions.weight, std=0.02)
        layer = torch.nn.TransformerDecoderLayer(
            d_model=width,
            nhead=num_heads,
            dim_feedforward=4 * width,
            dropout=dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
            device=device,
        )
        norm = torch.nn.LayerNorm(width, device=device)
        self.layers = torch.nn.TransformerDecoder(layer, num_layers=num_layers, norm=norm)
        self.output = torch.nn.Linear(width, vocab, device="meta")
        self.output.weight = tied_weight
        self.output.bias = torch.nn.Parameter(torch.zeros(vocab, device=device))
        self.register_buffer("arch", torch.tensor([num_layers, num_heads, max_positions], device=device))

    @property
    def max_positions(self) -> int:
        return int(self.positions.num_embeddings)

    def hidden(
        self, vectors: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Decoder states [B, T, width] for target prefixes ``input_ids`` [B, T] given ``vectors``
        [B, D]. Causal: position t sees tokens 0..t and the sentence vector only."""
        length = input_ids.shape[1]
        if length > self.max_positions:
            raise ValueError(
                f"target of {length} tokens exceeds the decoder's {self.max_positions} positions"
            )
        weight = self.output.weight
        pos = torch.arange(length, device=input_ids.device)
        x = F.embedding(input_ids, weight) + self.positions(pos).to(weight.dtype)
        memory = self.memory(vectors.to(self.memory.weight.dtype)).unsqueeze(1)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)  # True: hidden
        pad = None if attention_mask is None else ~attention_mask.bool()
        return self.layers(
            x.to(memory.dtype), memory, tgt_mask=causal, tgt_key_padding_mask=pad, tgt_is_causal=True
        )

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits for decoder states [..., width] (tied weight, own bias)."""
        weight = self.output.weight
        return F.linear(states, weight.to(states.dtype), self.output.bias.to(states.dtype))

    def forward(
        self, vectors: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits [B, T, V] of the next token at every position."""
        return self.logits(self.hidden(vectors, input_ids, attention_mask))


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


def _special_id(tokenizer: Any, kind: str) -> int:
    names = ("bos_token_id", "cls_token_id") if kind == "bos" else ("eos_token_id", "sep_token_id")
    for name in names:
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise ValueError(f"the student's tokenizer has no {kind.upper()} token; the decoder needs one")


class BottleneckObjective(Objective):
    """Translation (and optionally auto-encoding) from the sentence vector alone (module docstring)."""

    name = "bottleneck"

    def __init__(
        self,
        student: SentenceTransformer,
        decoder_layers: int = 2,
        decoder_heads: int = 4,
        translate_weight: float = 1.0,
        autoencode_weight: float = 0.0,
        align_weight: float = 0.0,
        koleo_weight: float = 0.0,
        decoder_dropout: float = 0.1,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__(student, max_seq_length)
        for label, w in (("translate", translate_weight), ("autoencode", autoencode_weight)):
            if not w >= 0:
                raise ValueError(f"{label}_weight must be >= 0, not {w}")
        self.translate_weight = float(translate_weight)
        self.autoencode_weight = float(autoencode_weight)
        self.align_weight = float(align_weight)
        self.koleo_weight = float(koleo_weight)
        tokenizer = student.tokenizer
        self.bos_id, self.eos_id = _special_id(tokenizer, "bos"), _special_id(tokenizer, "eos")
        embeddings = student[0].auto_model.get_input_embeddings()
        positions = int(self.max_seq_length)
        self.decoder = SentenceDecoder(
            embedding_dim(student),
            embeddings.weight,
            decoder_layers,
            decoder_heads,
            positions,
            decoder_dropout,
        )

    # ------------------------------------------------------------------ collate (no autograd)
    def collate(self, pairs: Sequence[ParallelPair]) -> dict[str, Any]:
        if not pairs:
            raise ValueError("the bottleneck objective needs a non-empty batch of pairs")
        texts = [p.src for p in pairs] + [p.tgt for p in pairs]
        return {
            "features": self.tokenize(texts),
            "targets": target_ids(self.student, texts, self.max_seq_length),
            "n": len(pairs),
        }

    # ------------------------------------------------------------------ forward
    def token_losses(
        self, vectors: torch.Tensor, targets: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Teacher-forced CE per target token (float32) for rows conditioned on ``vectors``: returns
        (ce [N], row index [N], correct [N]) over the N real next-token positions."""
        ids, attn = targets["input_ids"], targets["attention_mask"]
        labels = ids[:, 1:].masked_fill(attn[:, 1:] == 0, IGNORE_INDEX)
        states = self.decoder.hidden(vectors, ids[:, :-1], attn[:, :-1])
        selected = labels != IGNORE_INDEX
        logits = self.decoder.logits(states[selected]).float()
        gold = labels[selected]
        ce = F.cross_entropy(logits, gold, reduction="none")
        rows = torch.nonzero(selected)[:, 0]
        return ce, rows, (logits.detach().argmax(dim=-1) == gold)

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        n = int(batch["n"])
        targets = batch["targets"]
        vectors = self.embed(batch["features"])
        v_a, v_b = vectors[:n], vectors[n:]
        # Rows [A; B] of the targets; translation reads the other side's vector, auto-encoding its own.
        memory, tgt = torch.cat([v_b, v_a]), targets
        if self.autoencode_weight > 0:
            memory = torch.cat([memory, vectors])
            tgt = {k: torch.cat([v, v]) for k, v in targets.items()}
        ce, rows, correct = self.token_losses(memory, tgt)
        groups = [_group_mean(ce, (rows >= lo) & (rows < lo + n)) for lo in range(0, len(memory), n)]
        zero = vectors.sum() * 0.0
        translate = 0.5 * (_or(groups[0], zero) + _or(groups[1], zero))
        autoencode = 0.5 * (_or(groups[2], zero) + _or(groups[3], zero)) if len(groups) > 2 else zero
        align = F.mse_loss(v_a.float(), v_b.float())
        koleo = koleo_loss(v_a) + koleo_loss(v_b)
        loss = (
            self.translate_weight * translate
            + self.autoencode_weight * autoencode
            + self.align_weight * align
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
            "align": align.detach(),
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


def _group_mean(values: torch.Tensor, which: torch.Tensor) -> torch.Tensor | None:
    return values[which].mean() if bool(which.any()) else None


def _or(value: torch.Tensor | None, default: torch.Tensor) -> torch.Tensor:
    return default if value is None else value


@torch.no_grad()
def greedy_decode(
    objective_or_decoder: BottleneckObjective | SentenceDecoder,
    model: SentenceTransformer,
    texts: Sequence[str],
    max_len: int = 64,
) -> list[str]:
    """Encode ``texts`` with ``model`` (its default prompt, the exported pooling) and generate from
    each sentence vector alone, one argmax token at a time until EOS or ``max_len`` tokens.

    Shows what the vector retains: the decoder was trained to translate from it (and, with
    auto-encoding, to regenerate it), so its output is the trained target of that kind."""
    decoder = (
        objective_or_decoder.decoder
        if isinstance(objective_or_decoder, BottleneckObjective)
        else objective_or_decoder
    )
    if not texts:
        return []
    was = (model.training, decoder.training)
    model.eval()
    decoder.eval()
    try:
        prompt = default_prompt(model)
        features = model.tokenize([prompt + t for t in texts] if prompt else list(texts))
        device = next(decoder.parameters()).device
        features = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
        vectors = model(features)["sentence_embedding"]
        ids = _greedy_ids(decoder, vectors, model.tokenizer, min(max_len, decoder.max_positions - 1))
    finally:
        model.train(was[0])
        decoder.train(was[1])
    return [model.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]


def _greedy_ids(
    decoder: SentenceDecoder, vectors: torch.Tensor, tokenizer: Any, max_len: int
) -> list[list[int]]:
    bos, eos = _special_id(tokenizer, "bos"), _special_id(tokenizer, "eos")
    rows = vectors.shape[0]
    ids = torch.full((rows, 1), bos, dtype=torch.long, device=vectors.device)
    done = torch.zeros(rows, dtype=torch.bool, device=vectors.device)
    for _ in range(max_len):
        nxt = decoder(vectors, ids)[:, -1].argmax(dim=-1)
        nxt = nxt.masked_fill(done, eos)
        ids = torch.cat([ids, nxt.unsqueeze(1)], dim=1)
        done |= nxt == eos
        if bool(done.all()):
            break
    out = []
    for row in ids[:, 1:].tolist():
        out.append(row[: row.index(eos)] if eos in row else row)
    return out
