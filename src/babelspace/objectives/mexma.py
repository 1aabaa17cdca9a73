"""MEXMA: cross-lingual unmasking plus sentence alignment (Janeiro, Piwowarski, Gallinari, Barrault
2024, "MEXMA: Token-level objectives improve sentence representations", arXiv 2409.12737, §3;
ablations §5 and appendix B.2).

One shared encoder reads four views of each pair (A, B): masked A, masked B, clean A, clean B. The
sentence vector is the CLS state ``last_hidden_state[:, 0]`` (no pooler). A fresh transformer
*unmasking head* reconstructs the masked tokens of A from the masked token states of A whose
position 0 is replaced by the **clean** CLS of B, and vice versa, so the sentence vector of one
language must carry everything needed to fill in the other. Its output layer maps to the
vocabulary with the weight tied to the encoder's input word embeddings (plus its own bias), as in the
official code (facebookresearch/mexma ``model.py``), which trains everything. When the word
embeddings are frozen (requires_grad False when the objective is built, or
:meth:`MexmaObjective.untie_output_weight` called after freezing), the head gets its own trainable
copy of the matrix instead, so its output layer can still adapt (the input embeddings stay fixed).

    L = ce_weight    · ½ (CE(head(tok(Ã), cls(B)), A) + CE(head(tok(B̃), cls(A)), B))
      + sentence_mse_weight · MSE(cls(A), cls(B))                (unnormalised, symmetric)
      + koleo_weight · ½ (KoLeo(ĉls(A)) + KoLeo(ĉls(B)))         (L2-normalised, fp32)

with CE over masked positions only (40% of the non-special tokens, 80/10/10 mask/random/keep).
Under DDP each language's CE is the mean over every process's masked tokens (the token counts
are summed over the processes), so N processes train as one process on the whole batch.
The two languages' KoLeo terms are averaged, as in the official code. Attention dropout is off in the
head and, by default (``encoder_attention_dropout=False``, the official ``use_dropout_in_attention``
default), in the encoder too; residual and feed-forward dropout stay.
The ablation switches reproduce the paper's variants:

- ``unmasking="mono"``: the head of A gets A's own clean CLS (appendix B.2; much worse).
- ``token_gradients=False``: "sentence-level gradients only" (§5, Table 5): the masked token states
  fed to the head are detached, so the unmasking loss reaches the encoder's layers only through the
  sentence vector (the CLS inserted at position 0 still carries gradient). It cuts that one path:
  the head's output weight, tied to the word embeddings, still trains them as the vocabulary
  matrix (untie it, :meth:`MexmaObjective.untie_output_weight`, to cut that path as well).
- ``mse_views="masked"``: the sentence MSE between the CLS of the two *masked* passes instead of the
  clean ones; ``mse_views="masked_clean"``: between each masked CLS and the other language's clean CLS (the paper's
  Table 11 variant, 0.72 xsim++ worse than clean↔clean).
- ``koleo_weight=0``: no KoLeo (§5, Table 5).

Two options that are not the paper's (docs/mexma.md, "The CPU regime"):

- ``head_warmup_steps=N``: for the first N steps (the trainer calls :meth:`MexmaObjective.begin_step`)
  the head trains alone on the unmasking loss; the encoder runs without gradient and the tied output
  weight (the encoder's word embeddings) stays fixed. A fresh head's token-level gradients are noise
  from an untrained predictor; warming it up first is linear probing before fine-tuning.
- ``unmask_vocab="batch"``: the unmasking softmax over the token ids that occur in the batch (the
  targets among them) instead of the whole vocabulary, a sampled softmax that makes the vocabulary
  projection cost the batch's vocabulary instead of 250k rows.

Collapse, which KoLeo is there to prevent (§3 "KoLeo loss": without it the space "tends to be more
collapsed ... according to a basic measure of the variance across components"), is read from the
total variance of the L2-normalised CLS vectors (``1 − ||mean||²``,
:func:`babelspace.metrics.geometry.total_variance`), not from the effective rank of their
spectrum, which is scale-invariant and stays high inside a narrow cone. A student whose CLS state
was never trained as a sentence vector can start collapsed before any MEXMA step: e5-small cut to
its first 2 to 6 layers has a CLS total variance of at most 0.0003, against 0.10 for the full model
(docs/mexma.md, ``bench/start_geometry.py``).

=================  ==========================================================
Inputs             parallel pairs (A = ``src``, B = ``tgt``); the student should pool
                   by CLS so the exported model encodes what is trained
                   (:func:`make_mexma_student`)
Outputs            ``loss``; components ``ce`` (mean of both directions), ``ce_a``,
                   ``ce_b``, ``sentence_mse``, ``koleo`` (unweighted, mean over both
                   languages), ``unmask_acc`` (top-1 accuracy on masked tokens)
=================  ==========================================================

Example::

    student = make_mexma_student(SentenceTransformer("intfloat/multilingual-e5-small"))
    objective = MexmaObjective(student, head_layers=6, head_heads=8)
    batch = objective.collate(pairs)
    out = objective(batch); out["loss"].backward()
    student.save("out/mexma-e5-small")          # CLS pooling; the head is not exported
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

from babelspace.data.pairs import ParallelPair
from babelspace.objectives.base import Objective
from babelspace.objectives.parts.gather import gather_rows, masked_means, world_scale
from babelspace.objectives.parts.koleo import koleo_loss
from babelspace.objectives.parts.masking import IGNORE_INDEX, SELECTIONS, mask_tokens, special_or_prompt
from babelspace.objectives.parts.unmasking_head import UnmaskingHead

__all__ = [
    "UNMASKING_MODES",
    "MSE_VIEWS",
    "UNMASK_VOCABS",
    "MexmaObjective",
    "disable_attention_dropout",
    "make_mexma_student",
]

logger = logging.getLogger(__name__)

UNMASKING_MODES = ("cross", "mono")
MSE_VIEWS = ("clean", "masked", "masked_clean")
UNMASK_VOCABS = ("full", "batch")


def make_mexma_student(model: SentenceTransformer, normalize: bool | None = None) -> SentenceTransformer:
    """The student with its Pooling module replaced by CLS pooling (position 0, prompt included).

    The returned model shares the Transformer (and any other) module with ``model`` and keeps its
    prompts. ``normalize``: None keeps a Normalize module if there is one, True adds one at the end
    if missing, False removes it (MEXMA trains the unnormalised CLS; cosine evaluation is the same
    either way). Returns ``model`` itself when nothing changes.
    """
    modules = list(model)
    pool_idx = next((i for i, m in enumerate(modules) if isinstance(m, Pooling)), None)
    dim = modules[0].get_embedding_dimension()
    changed = False
    if pool_idx is None:
        modules.insert(1, Pooling(dim, pooling_mode="cls"))
        changed = True
    elif not (modules[pool_idx].pooling_mode in ("cls", ("cls",)) and modules[pool_idx].include_prompt):
        modules[pool_idx] = Pooling(dim, pooling_mode="cls", include_prompt=True)
        changed = True
    has_norm = any(isinstance(m, Normalize) for m in modules)
    if normalize is True and not has_norm:
        modules.append(Normalize())
        changed = True
    elif normalize is False and has_norm:
        modules = [m for m in modules if not isinstance(m, Normalize)]
        changed = True
    if not changed:
        return model
    new = SentenceTransformer(modules=modules, device=str(model.device))
    new.prompts = dict(model.prompts or {})
    new.default_prompt_name = model.default_prompt_name
    return new


def disable_attention_dropout(model: torch.nn.Module) -> int:
    """Turn attention-probability dropout off in every self-attention module of ``model`` (BERT /
    XLM-R style: ``*SelfAttention`` with a ``dropout`` module and/or a ``dropout_prob`` used by the
    SDPA path), as the official MEXMA code does (``use_dropout_in_attention=False``). Residual and
    feed-forward dropout are untouched. Returns the number of modules changed."""
    changed = 0
    for module in model.modules():
        if not type(module).__name__.endswith("SelfAttention"):
            continue
        touched = False
        if isinstance(getattr(module, "dropout", None), torch.nn.Dropout):
            module.dropout.p = 0.0
            touched = True
        for attr in ("dropout_prob", "attention_dropout"):
            if isinstance(getattr(module, attr, None), float):
                setattr(module, attr, 0.0)
                touched = True
        changed += touched
    return changed


def _joint_features(batch: dict[str, Any]) -> dict[str, Any]:
    """The clean and masked views stacked into one encoder call (same shapes): one embedding
    backward, larger GEMMs."""
    joint = dict(batch["clean"])
    joint["input_ids"] = torch.cat([batch["clean"]["input_ids"], batch["masked"]["input_ids"]])
    for key in ("attention_mask", "token_type_ids"):
        if key in joint:
            joint[key] = torch.cat([joint[key], joint[key]])
    return joint


def _is_cls_pooled(model: SentenceTransformer) -> bool:
    for m in model:
        if isinstance(m, Pooling):
            return m.pooling_mode in ("cls", ("cls",)) and bool(m.include_prompt)
    return False


def _check_settings(unmasking: str, mse_views: str, mask_ratio: float, mask_selection: str) -> None:
    """A ValueError naming the setting when a mode or the mask ratio is not one MEXMA knows."""
    if mask_selection not in SELECTIONS:
        raise ValueError(f"mask_selection must be one of {SELECTIONS}, not {mask_selection!r}")
    if unmasking not in UNMASKING_MODES:
        raise ValueError(f"unmasking must be one of {UNMASKING_MODES}, not {unmasking!r}")
    if mse_views not in MSE_VIEWS:
        raise ValueError(f"mse_views must be one of {MSE_VIEWS}, not {mse_views!r}")
    if not 0.0 < mask_ratio <= 1.0:
        raise ValueError(f"mask_ratio must be in (0, 1], not {mask_ratio}")


class MexmaObjective(Objective):
    """MEXMA (see module docstring). A = ``pair.src``, B = ``pair.tgt``."""

    name = "mexma"

    def __init__(
        self,
        student: SentenceTransformer,
        unmasking: str = "cross",
        token_gradients: bool = True,
        mse_views: str = "clean",
        koleo_weight: float = 0.01,
        ce_weight: float = 1.0,
        sentence_mse_weight: float = 1.0,
        mask_ratio: float = 0.4,
        mask_selection: str = "exact",
        head_layers: int = 6,
        head_heads: int = 8,
        head_dropout: float = 0.1,
        head_ffn: int | None = None,
        encoder_attention_dropout: bool = False,
        untie_output: bool | None = None,
        mask_prompt: bool = False,
        max_seq_length: int | None = None,
        generator: torch.Generator | None = None,
        gather_negatives: bool = False,
        unmask_vocab: str = "full",
        head_warmup_steps: int = 0,
    ) -> None:
        super().__init__(student, max_seq_length)
        # Under DDP: KoLeo over every process's sentence vectors (objectives/parts/gather.py)
        self.gather_negatives = gather_negatives
        _check_settings(unmasking, mse_views, mask_ratio, mask_selection)
        self.unmasking = unmasking
        self.token_gradients = token_gradients
        self.mse_views = mse_views
        self.koleo_weight = float(koleo_weight)
        self.ce_weight = float(ce_weight)
        self.sentence_mse_weight = float(sentence_mse_weight)
        self.mask_ratio = float(mask_ratio)
        self.mask_selection = mask_selection
        self.generator = generator
        if unmask_vocab not in UNMASK_VOCABS:
            raise ValueError(f"unmask_vocab must be one of {UNMASK_VOCABS}, not {unmask_vocab!r}")
        if head_warmup_steps < 0:
            raise ValueError(f"head_warmup_steps must be >= 0, not {head_warmup_steps}")
        self.unmask_vocab = unmask_vocab
        self.head_warmup_steps = int(head_warmup_steps)
        #: True while the head trains alone: set by :meth:`begin_step`, which babelspace's trainer
        #: calls before every step (a loop that never calls it trains everything from the start)
        self.head_only = False

        if not _is_cls_pooled(student):
            logger.warning(
                "MEXMA trains the CLS vector but the student does not pool by CLS; "
                "wrap it with make_mexma_student() so the exported model encodes what is trained"
            )
        self._read_tokenizer(student.tokenizer, mask_prompt)
        embeddings = self.word_embeddings
        hidden = int(embeddings.weight.shape[1])
        self.head = UnmaskingHead(
            hidden, embeddings.weight, head_layers, head_heads, head_dropout, ffn=head_ffn
        )
        if untie_output or (untie_output is None and not embeddings.weight.requires_grad):
            self.untie_output_weight()
        self.encoder_attention_dropout = encoder_attention_dropout
        if not encoder_attention_dropout:
            n_off = disable_attention_dropout(student[0])
            logger.debug("MEXMA: attention dropout off in %d encoder attention modules", n_off)
        self._warned_frozen_output = False

    def _read_tokenizer(self, tokenizer: Any, mask_prompt: bool) -> None:
        """The token ids masking needs: the mask token, the special tokens (never masked), the
        vocabulary sizes, and the prompt's ids (never masked unless ``mask_prompt``)."""
        if getattr(tokenizer, "mask_token_id", None) is None:
            raise ValueError("the student's tokenizer has no mask token; MEXMA needs one")
        self.mask_token_id = int(tokenizer.mask_token_id)
        self.special_ids = sorted({int(i) for i in tokenizer.all_special_ids})
        self.vocab_size = int(self.word_embeddings.weight.shape[0])
        # Random replacements come from the tokenizer's real pieces (the matrix may have spare rows).
        self.random_vocab_size = min(len(tokenizer), self.vocab_size)
        self.prompt_ids: list[int] = []
        if self.prompt and not mask_prompt:
            self.prompt_ids = list(tokenizer(self.prompt.rstrip(), add_special_tokens=False)["input_ids"])

    def untie_output_weight(self) -> None:
        """Give the unmasking head its own trainable output matrix (a copy of the word embeddings).

        For runs whose word embeddings are frozen: the tied output could not adapt. Call it after
        freezing and before building the optimizer (the objective does it itself when the embeddings
        are already frozen when it is built)."""
        if self.head.tied:
            self.head.untie()
            logger.info("MEXMA: the unmasking head's output layer is untied from the frozen word embeddings")

    @property
    def word_embeddings(self) -> torch.nn.Embedding:
        return self.student[0].auto_model.get_input_embeddings()

    # ------------------------------------------------------------------ collate (no autograd)
    def mask(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return mask_tokens(
            input_ids,
            attention_mask,
            self.mask_token_id,
            self.random_vocab_size,
            ratio=self.mask_ratio,
            special_tokens_mask=special_or_prompt(input_ids, self.special_ids, self.prompt_ids),
            special_ids=self.special_ids,
            generator=self.generator,
            selection=self.mask_selection,
        )

    def collate(self, pairs: Sequence[ParallelPair]) -> dict[str, Any]:
        if not pairs:
            raise ValueError("MEXMA needs a non-empty batch of pairs")
        n = len(pairs)
        clean = self.tokenize([p.src for p in pairs] + [p.tgt for p in pairs])
        ids, attn = clean["input_ids"], clean["attention_mask"]
        # Masked per language so each side has at least one masked token.
        m_a, l_a = self.mask(ids[:n], attn[:n])
        m_b, l_b = self.mask(ids[n:], attn[n:])
        masked = dict(clean)
        masked["input_ids"] = torch.cat([m_a, m_b])
        return {"clean": clean, "masked": masked, "labels": torch.cat([l_a, l_b]), "n": n}

    def begin_step(self, step: int) -> None:
        """The head trains alone while ``step < head_warmup_steps`` (the trainer calls this before
        every optimizer step, so a resumed run is in the same phase as the uninterrupted one)."""
        self.head_only = step < self.head_warmup_steps

    # ------------------------------------------------------------------ forward
    def token_states(self, features: dict[str, Any]) -> torch.Tensor:
        """Last hidden states [B, L, H] of the student's transformer module."""
        return self.student[0](dict(features))["token_embeddings"]

    def unmasking_logits(
        self,
        masked_states: torch.Tensor,
        context: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor,
        vocab: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [N, V] at the N labelled positions: the head reads ``masked_states`` with position
        0 replaced by ``context`` (a sentence vector per row). With ``token_gradients=False`` the
        token states are detached (gradient reaches the encoder's states only through ``context``;
        the tied output weight still trains the word embeddings). ``vocab``: the sorted ids scored
        (``unmask_vocab="batch"``; None: every id). While the head trains alone the tied output
        weight gets no gradient (it is the encoder's word embeddings)."""
        tokens = masked_states[:, 1:]
        if not self.token_gradients:
            tokens = tokens.detach()
        if self.head.tied and not self.head.output.weight.requires_grad and not self._warned_frozen_output:
            logger.warning(
                "MEXMA: the word embeddings are frozen and the unmasking head's output is tied to them, "
                "so it cannot adapt; call untie_output_weight() after freezing"
            )
            self._warned_frozen_output = True
        states = torch.cat([context.unsqueeze(1).to(tokens.dtype), tokens], dim=1)
        return self.head(
            states, attention_mask, labels != IGNORE_INDEX, vocab=vocab, frozen_tied=self.head_only
        )

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        n = int(batch["n"])
        labels = batch["labels"]
        attn = batch["clean"]["attention_mask"]
        need_masked_grad = self.token_gradients or self.mse_views != "clean"
        if self.head_only:  # the head warm-up: the encoder is frozen, its states are inputs
            with torch.no_grad():
                states = self.token_states(_joint_features(batch))
            clean_cls, masked_states = states[: 2 * n, 0], states[2 * n :]
        elif need_masked_grad or not torch.is_grad_enabled():
            # One encoder call over [clean; masked] (same shapes): one embedding backward, larger GEMMs.
            states = self.token_states(_joint_features(batch))
            clean_cls, masked_states = states[: 2 * n, 0], states[2 * n :]
        else:  # the masked pass needs no gradient at all
            clean_cls = self.token_states(batch["clean"])[:, 0]
            with torch.no_grad():
                masked_states = self.token_states(batch["masked"])
        cls_a, cls_b = clean_cls[:n], clean_cls[n:]

        context = torch.cat([cls_b, cls_a]) if self.unmasking == "cross" else clean_cls
        vocab = torch.unique(batch["clean"]["input_ids"]) if self.unmask_vocab == "batch" else None
        logits = self.unmasking_logits(masked_states, context, attn, labels, vocab)
        selected = labels != IGNORE_INDEX
        targets = labels[selected]
        if vocab is not None:  # column j scores id vocab[j]; every target is one of the batch's ids
            targets = torch.searchsorted(vocab, targets)
        token_ce = F.cross_entropy(logits.float(), targets, reduction="none")
        side_a = (torch.nonzero(selected)[:, 0] < n).to(token_ce.device)
        # under DDP (training): each side's mean over every process's masked tokens
        ce_a, ce_b = masked_means(token_ce, [side_a, ~side_a], across_processes=self.training)
        sides = [c for c in (ce_a, ce_b) if c is not None]
        ce = torch.stack(sides).mean() if sides else clean_cls.sum() * 0.0

        if self.mse_views == "clean":
            sentence_mse = F.mse_loss(cls_a.float(), cls_b.float())
        else:
            m_cls = masked_states[:, 0].float()
            if self.mse_views == "masked":
                sentence_mse = F.mse_loss(m_cls[:n], m_cls[n:])
            else:
                sentence_mse = 0.5 * (
                    F.mse_loss(m_cls[:n], cls_b.float()) + F.mse_loss(m_cls[n:], cls_a.float())
                )

        if self.gather_negatives:
            koleo = 0.5 * (koleo_loss(gather_rows(cls_a)) + koleo_loss(gather_rows(cls_b))) * world_scale()
        else:
            koleo = 0.5 * (koleo_loss(cls_a) + koleo_loss(cls_b))  # averaged, as the official code
        if self.head_only:  # the unmasking loss alone (the other terms have no gradient to give)
            loss = self.ce_weight * ce
        else:
            loss = self.ce_weight * ce + self.sentence_mse_weight * sentence_mse + self.koleo_weight * koleo
        with torch.no_grad():
            acc = (logits.argmax(dim=-1) == targets).float().mean() if targets.numel() else ce.new_zeros(())
        nan = ce.new_tensor(float("nan"))
        return {
            "loss": loss,
            "ce": ce.detach(),
            "ce_a": (ce_a if ce_a is not None else nan).detach(),
            "ce_b": (ce_b if ce_b is not None else nan).detach(),
            "sentence_mse": sentence_mse.detach(),
            "koleo": koleo.detach(),
            "unmask_acc": acc,
        }

    # ------------------------------------------------------------------ checkpoints
    def head_state(self) -> dict[str, Any]:
        """The head's state; without the output weight while it is tied (it is the student's
        embedding matrix), with it once untied."""
        state = super().head_state()
        return {k: v for k, v in state.items() if k != "head.output.weight"} if self.head.tied else state

    def load_head_state(self, state: dict[str, Any]) -> None:
        """Load what :meth:`head_state` returned (strict about the head's own keys)."""
        if "head.output.weight" in state:
            self.untie_output_weight()
        missing, unexpected = self.load_state_dict(state, strict=False)
        tied_key = "head.output.weight" if self.head.tied else None
        missing = [k for k in missing if not k.startswith("student.") and k != tied_key]
        if missing or unexpected:
            raise KeyError(f"head state mismatch: missing {missing}, unexpected {unexpected}")
