"""Run by tests/training/test_training_sharded.py under ``torchrun --nproc_per_node 2`` (gloo, CPU): shard a tiny
sentence-transformers student with torch's FSDP2 ``fully_shard`` and check babelspace's sharded
helpers against the unsharded model. Prints ``OK <check>`` lines; any failure raises."""

from __future__ import annotations

import copy
import sys

import torch
import torch.distributed as dist
from sentence_transformers import SentenceTransformer
from torch.distributed.fsdp import fully_shard

from babelspace.training.sharded import FullStudent, full_training_state, load_full_training_state

TEXTS = ["king house", "lord city", "god day", "people land", "house of the king", "a city", "day", "land"]


class Objective(torch.nn.Module):
    def __init__(self, student: SentenceTransformer) -> None:
        super().__init__()
        self.student = student
        self.head = torch.nn.Linear(student.get_sentence_embedding_dimension(), 3)

    def forward(self, texts: list[str]) -> torch.Tensor:
        emb = self.student(self.student.tokenize(texts))["sentence_embedding"]
        return self.head(emb).pow(2).mean()


def main(model_dir: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    objective = Objective(SentenceTransformer(model_dir, device="cpu"))
    whole = {k: v.clone() for k, v in objective.student.state_dict().items()}
    full = FullStudent(objective, objective.student, rank == 0)
    for layer in objective.student[0].auto_model.encoder.layer:
        fully_shard(layer)
    fully_shard(objective)
    assert isinstance(next(objective.parameters()), torch.distributed.tensor.DTensor)
    optimizer = torch.optim.AdamW(objective.parameters(), lr=1e-2)

    got = full.refresh(objective)
    if rank == 0:
        assert all(torch.equal(got.state_dict()[k], v) for k, v in whole.items())
        print("OK refresh equals the unsharded student", flush=True)

    def step(i: int) -> None:
        half = TEXTS[(i + rank) % 4 :: 2][:2]  # each rank its own half of a global batch
        objective(half).backward()
        optimizer.step()
        optimizer.zero_grad()

    for i in range(3):
        step(i)
    saved = copy.deepcopy(full_training_state(objective, optimizer))  # as a checkpoint would serialise it
    for i in range(3, 6):
        step(i)
    first = {k: v.clone() for k, v in (full.refresh(objective) or torch.nn.Module()).state_dict().items()}
    box = [saved]
    dist.broadcast_object_list(box, src=0)  # every rank reads the checkpoint file
    load_full_training_state(objective, optimizer, *box[0])
    for i in range(3, 6):
        step(i)
    again = full.refresh(objective)
    if rank == 0:
        assert any(not torch.equal(first[k], v) for k, v in whole.items())  # it trained
        assert all(torch.allclose(again.state_dict()[k], v, atol=1e-6) for k, v in first.items())
        print("OK resumed from the full state equals the uninterrupted run", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
