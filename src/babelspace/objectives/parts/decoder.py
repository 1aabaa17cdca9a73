"""The translation decoder of the bottleneck objective (:mod:`babelspace.objectives.bottleneck`): a
small pre-LN transformer decoder whose whole memory is one projected sentence vector, with token
embeddings tied to the student's input embedding matrix and an optional target-language embedding
(LASER §3). Its ``arch``, ``vocab_ids`` and ``lang_codes`` buffers let a checkpoint rebuild it
(:mod:`babelspace.objectives.decoding`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

__all__ = ["SentenceDecoder", "decode_language_codes"]


class SentenceDecoder(torch.nn.Module):
    """Transformer decoder conditioned on one sentence vector per row.

    The memory is ``Linear(vector_dim -> width)(v)``: one slot, so the decoder's only view of the
    source is the sentence vector. Token embeddings and the output projection share ``tied_weight``
    (the student's input embedding matrix, [V, width]); the output bias is the decoder's own.
    ``arch`` (a buffer: layers, heads, max positions) lets a checkpoint rebuild the decoder.
    ``vocab_ids`` (optional, a buffer too): the restricted target vocabulary, decoder id -> tokenizer
    id; the decoder then reads and predicts decoder ids, and its softmax has ``len(vocab_ids)`` rows
    of ``tied_weight`` (still tied) instead of all of them. ``languages`` (optional): the target
    languages it can write; each gets a learned embedding added to every input position (LASER §3),
    and every call then names the target language of each row. The codes are kept in the buffer
    ``lang_codes`` (UTF-8 bytes, comma-separated), so a checkpoint rebuilds the same table."""

    def __init__(
        self,
        vector_dim: int,
        tied_weight: torch.nn.Parameter,
        num_layers: int = 2,
        num_heads: int = 4,
        max_positions: int = 512,
        dropout: float = 0.1,
        vocab_ids: torch.Tensor | None = None,
        languages: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        vocab, width = tied_weight.shape
        self.languages = _check_languages(languages)
        if vocab_ids is not None:
            _check_vocab_ids(vocab_ids, vocab)
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
        out_size = vocab if vocab_ids is None else len(vocab_ids)
        self.output.bias = torch.nn.Parameter(torch.zeros(out_size, device=device))
        self.register_buffer("arch", torch.tensor([num_layers, num_heads, max_positions], device=device))
        ids = None if vocab_ids is None else vocab_ids.to(device=device, dtype=torch.long)
        self.register_buffer("vocab_ids", ids)  # decoder id -> tokenizer id; None: the full vocabulary
        self.tokenizer_vocab = vocab
        self.lang_embed: torch.nn.Embedding | None = None
        codes = None
        if self.languages:
            self.lang_embed = torch.nn.Embedding(len(self.languages), width, device=device)
            torch.nn.init.normal_(self.lang_embed.weight, std=0.02)
            codes = torch.tensor(list(",".join(self.languages).encode()), dtype=torch.uint8, device=device)
        self.register_buffer("lang_codes", codes)

    def language_ids(self, langs: Sequence[str], device: torch.device | None = None) -> torch.Tensor:
        """Row indices of the language embedding for target-language codes ``langs``."""
        if not self.languages:
            raise ValueError("this decoder is not conditioned on a target language")
        index = {lang: i for i, lang in enumerate(self.languages)}
        unknown = sorted({lang for lang in langs if lang not in index})
        if unknown:
            raise ValueError(
                f"the decoder cannot write {', '.join(unknown)}: it was trained for {', '.join(self.languages)}"
            )
        return torch.tensor([index[lang] for lang in langs], dtype=torch.long, device=device)

    @property
    def vocab_size(self) -> int:
        """Size of the output softmax: the target vocabulary if restricted, else the tokenizer's."""
        return int(self.output.bias.shape[0])

    def from_tokenizer(self, ids: torch.Tensor) -> torch.Tensor:
        """Tokenizer ids -> decoder ids (identity for the full vocabulary; ids outside a restricted
        target vocabulary map to decoder id 0, the ``<unk>`` token of :func:`target_vocab`)."""
        if self.vocab_ids is None:
            return ids
        lookup = torch.zeros(self.tokenizer_vocab, dtype=torch.long, device=ids.device)
        lookup[self.vocab_ids.to(ids.device)] = torch.arange(len(self.vocab_ids), device=ids.device)
        return lookup[ids]

    def to_tokenizer(self, ids: torch.Tensor) -> torch.Tensor:
        """Decoder ids -> tokenizer ids (identity for the full vocabulary)."""
        return ids if self.vocab_ids is None else self.vocab_ids.to(ids.device)[ids]

    def _output_weight(self) -> torch.Tensor:
        weight = self.output.weight
        return weight if self.vocab_ids is None else weight.index_select(0, self.vocab_ids)

    @property
    def max_positions(self) -> int:
        return int(self.positions.num_embeddings)

    def hidden(
        self,
        vectors: torch.Tensor,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        lang_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Decoder states [B, T, width] for target prefixes ``input_ids`` [B, T] (decoder ids, see
        :meth:`from_tokenizer`) given ``vectors`` [B, D] and, for a language-conditioned decoder, the
        target languages ``lang_ids`` [B] (:meth:`language_ids`). Causal: position t sees tokens
        0..t, the target language and the sentence vector only."""
        length = input_ids.shape[1]
        if length > self.max_positions:
            raise ValueError(
                f"target of {length} tokens exceeds the decoder's {self.max_positions} positions"
            )
        weight = self.output.weight
        pos = torch.arange(length, device=input_ids.device)
        x = F.embedding(self.to_tokenizer(input_ids), weight) + self.positions(pos).to(weight.dtype)
        language = self._language(lang_ids, len(input_ids))
        if language is not None:
            x = x + language.to(weight.dtype)
        memory = self.memory(vectors.to(self.memory.weight.dtype)).unsqueeze(1)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)  # True: hidden
        pad = None if attention_mask is None else ~attention_mask.bool()
        return self.layers(
            x.to(memory.dtype), memory, tgt_mask=causal, tgt_key_padding_mask=pad, tgt_is_causal=True
        )

    def _language(self, lang_ids: torch.Tensor | None, rows: int) -> torch.Tensor | None:
        """The target-language embedding [B, 1, width] to add at every position (None without one)."""
        if self.lang_embed is None:
            if lang_ids is not None:
                raise ValueError("this decoder is not conditioned on a target language; give no lang_ids")
            return None
        if lang_ids is None or lang_ids.shape != (rows,):
            raise ValueError(
                f"this decoder writes {', '.join(self.languages)}: give one target language per row"
            )
        return self.lang_embed(lang_ids).unsqueeze(1)

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        """Logits over the decoder's vocabulary for states [..., width] (tied weight, own bias)."""
        weight = self._output_weight()
        return F.linear(states, weight.to(states.dtype), self.output.bias.to(states.dtype))

    def forward(
        self,
        vectors: torch.Tensor,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        lang_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [B, T, V] of the next token at every position."""
        return self.logits(self.hidden(vectors, input_ids, attention_mask, lang_ids))


def _check_languages(languages: Sequence[str] | None) -> tuple[str, ...]:
    if languages is None:
        return ()
    langs = tuple(str(lang) for lang in languages)
    if not langs or any(not lang or "," in lang for lang in langs) or len(set(langs)) != len(langs):
        raise ValueError(f"decoder languages must be distinct non-empty codes without commas, not {langs}")
    return langs


def decode_language_codes(codes: torch.Tensor | None) -> list[str] | None:
    """The language list a decoder's ``lang_codes`` buffer holds (None: not conditioned)."""
    if codes is None:
        return None
    return bytes(codes.to(torch.uint8).tolist()).decode().split(",")


def _check_vocab_ids(vocab_ids: torch.Tensor, full_size: int) -> None:
    if vocab_ids.dim() != 1 or len(vocab_ids) < 2:
        raise ValueError(
            f"a target vocabulary is a 1-D tensor of >= 2 token ids, not {tuple(vocab_ids.shape)}"
        )
    if vocab_ids.dtype.is_floating_point or int(vocab_ids.min()) < 0 or int(vocab_ids.max()) >= full_size:
        raise ValueError(f"target vocabulary ids must be integers in [0, {full_size})")
    if len(torch.unique(vocab_ids)) != len(vocab_ids):
        raise ValueError("target vocabulary ids must be distinct")
