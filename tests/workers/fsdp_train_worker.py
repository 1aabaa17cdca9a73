"""Run by tests/training/test_training_sharded.py under ``torchrun --nproc_per_node 2`` (gloo, CPU): ``babelspace
train`` with its objective sharded by torch's FSDP2.

accelerate turns FSDP on for GPUs only, so here its ``prepare`` is replaced by what it does for
FSDP2 — ``fully_shard`` on every transformer block and on the objective, and the optimizer's
parameters switched to the shards — and the trainer is told it runs sharded. The trainer's own
sharded path (gathers for dev evaluation and export, full checkpoints, resume) is the real code.
"""

from __future__ import annotations

import sys

import torch
from torch.distributed.fsdp import fully_shard

import babelspace.training.trainer as trainer_module
from babelspace.cli import main


def shard_prepare(objective: torch.nn.Module, optimizer: torch.optim.Optimizer):
    names = {id(p): n for n, p in objective.named_parameters()}
    for module in objective.modules():
        if type(module).__name__ == "BertLayer":
            fully_shard(module)
    fully_shard(objective)
    shards = dict(objective.named_parameters())
    for group in optimizer.param_groups:
        group["params"] = [shards[names[id(p)]] for p in group["params"]]
    dtensors = sum(isinstance(p, torch.distributed.tensor.DTensor) for p in objective.parameters())
    print(f"SHARDED {dtensors} of {len(shards)} parameters", flush=True)
    return objective, optimizer


def make_accelerator(device, precision):
    accelerator = _make_accelerator(device, precision)
    accelerator.prepare = shard_prepare
    return accelerator


_make_accelerator = trainer_module.make_accelerator
trainer_module.make_accelerator = make_accelerator
trainer_module.check_sharding = lambda accelerator: True

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
