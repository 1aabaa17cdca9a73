"""Exporting the trained student as a plain sentence-transformers folder.

A distillation student trained in the mean-centred teacher space (``--center-teacher``) outputs
``T - mu``; the exported model must be a drop-in replacement for its teacher, whose users index raw
teacher vectors ``T``. The export therefore adds ``mu`` back: into the bias of the student's last
Dense projection when it is linear, or else (no Dense, or a last Dense with an activation, such as
LaBSE's tanh Dense, where a bias shift would change the output non-linearly) as a final identity
Dense layer whose bias is ``mu``; with ``--export-norm teacher`` as ``Normalize`` then a Dense
``r · x + mu`` (see :mod:`babelspace.models.output_map`). Standard sentence-transformers modules,
so the folder loads without babelspace.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense, Normalize

from babelspace.checkpoints.checkpoint import state_bytes
from babelspace.models.encoder import default_prompt, embedding_dim, is_linear_dense
from babelspace.models.output_map import OutputMap
from babelspace.models.prompts import trained_prompts
from babelspace.training.config import TrainConfig
from babelspace.training.output.folder import export_model_atomically
from babelspace.training.output.model_card import fill_model_card, write_model_card
from babelspace.training.setup.phases import TeacherTargets
from babelspace.writable import write_json

# Beside the exported model: the teacher mean vector added back to the student's output.
SHIFT_FILE = "babelspace_teacher_mean.npy"


def exported_shift(output: str | Path) -> np.ndarray | None:
    """The teacher mean an export added back (``SHIFT_FILE`` beside the model), or None."""
    path = Path(output) / SHIFT_FILE
    return np.load(path) if path.is_file() else None


def _last_dense(modules: list[torch.nn.Module]) -> int | None:
    """Index of the last Dense module when it is linear and nothing but a Normalize follows it."""
    for i in range(len(modules) - 1, -1, -1):
        if isinstance(modules[i], Dense):
            return i if is_linear_dense(modules[i]) else None
        if not isinstance(modules[i], Normalize):
            return None
    return None


def _affine_layer(shift: np.ndarray, like: torch.Tensor, scale: float = 1.0) -> Dense:
    """``scale · x + shift`` as a standard Dense module. Built without drawing from the global
    random generator: an export in the middle of training must not change its dropout masks."""
    d = len(shift)
    with torch.random.fork_rng(devices=[]):
        layer = Dense(d, d, bias=True, activation_function=torch.nn.Identity())
    with torch.no_grad():
        layer.linear.weight.copy_(scale * torch.eye(d))
        layer.linear.bias.copy_(torch.as_tensor(shift, dtype=torch.float32))
    return layer.to(like.device)


def _view(student: SentenceTransformer, modules: list[torch.nn.Module]) -> SentenceTransformer:
    """A model of ``modules`` (sharing the student's weights) with the student's settings."""
    like = next(student.parameters())
    view = SentenceTransformer(modules=modules, device=str(like.device))
    view.prompts, view.default_prompt_name = dict(student.prompts or {}), student.default_prompt_name
    view.max_seq_length = student.max_seq_length
    view.model_card_data = student.model_card_data
    return view


def export_output_map(cfg: TrainConfig, targets: TeacherTargets) -> OutputMap:
    """What the exported model applies to the student's (centred-space) output: the teacher's
    mean added back, after giving the centred part the teacher's norm (``--export-space
    teacher``, a drop-in for the teacher; ``--export-norm``), or nothing (``centred``)."""
    if cfg.export_space != "teacher":
        return OutputMap()
    return OutputMap(shift=targets.shift, radius=targets.radius)


@contextmanager
def mapped(student: SentenceTransformer, output_map: OutputMap | None) -> Iterator[SentenceTransformer]:
    """The student with ``output_map`` applied to its output, sharing its weights; the student
    itself is restored bit for bit afterwards (a resumed run must see exactly the weights it left).
    A shift alone goes into the bias of the last Dense projection; a radius appends standard
    ``Normalize`` and Dense (radius · identity, bias = shift) modules, so the folder loads
    without babelspace."""
    if output_map is None or output_map.identity:
        yield student
        return
    shift = np.zeros(embedding_dim(student), np.float32) if output_map.shift is None else output_map.shift
    modules = list(student)
    at = len(modules) - 1 if isinstance(modules[-1], Normalize) else len(modules)
    like = next(student.parameters())
    if output_map.radius is not None:
        head = [Normalize(), _affine_layer(shift, like, output_map.radius)]
        yield _view(student, modules[:at] + head + modules[at:])
        return
    idx = _last_dense(modules)
    if idx is None:
        yield _view(student, modules[:at] + [_affine_layer(shift, like)] + modules[at:])
        return
    bias = modules[idx].linear.bias
    saved = bias.detach().clone()
    with torch.no_grad():
        bias.add_(torch.as_tensor(shift, dtype=bias.dtype, device=bias.device))
    try:
        yield student
    finally:
        with torch.no_grad():
            bias.copy_(saved)


@contextmanager
def _as_saved(model: SentenceTransformer, max_seq_length: int | None) -> Iterator[None]:
    """``model`` with the settings it is saved with; restored afterwards (training continues at its
    own length and prompts)."""
    length, prompts = model.max_seq_length, model.prompts
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    model.prompts = trained_prompts(prompts, default_prompt(model))
    try:
        yield
    finally:
        model.max_seq_length, model.prompts = length, prompts


def export_student(
    student: SentenceTransformer,
    cfg: TrainConfig,
    info: dict[str, Any],
    output_map: OutputMap | None = None,
    max_seq_length: int | None = None,
) -> None:
    """Write the student (with ``output_map``: the teacher's mean added back) to ``cfg.output``,
    atomically, with ``max_seq_length`` (None: the student's) and the prompt it trained with under
    every prompt name (:func:`~babelspace.models.prompts.trained_prompts`). ``SentenceTransformer.save`` leaves the model in eval mode; the caller's mode is
    restored, so training after a mid-run export keeps its dropout (as a run resumed from that step
    does)."""
    was_training = student.training
    shift = None if output_map is None else output_map.shift
    try:
        with mapped(student, output_map) as model, _as_saved(model, max_seq_length):
            cfg_dict = cfg.to_dict()
            fill_model_card(model, cfg_dict)

            def save(folder: Path) -> None:
                model.save(str(folder))
                write_model_card(model, folder, cfg_dict)  # babelspace's card, not a copy of the base's
                write_json(folder / "babelspace_best.json", info)
                if shift is not None:  # what was added back, for the record
                    np.save(folder / SHIFT_FILE, np.asarray(shift, dtype=np.float32))

            needed = state_bytes(model.state_dict())
            export_model_atomically(save, Path(cfg.output), info, needed_bytes=needed)
    finally:
        student.train(was_training)
