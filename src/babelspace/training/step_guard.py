"""What each optimizer step checks, kept on the device and read by the host every ``--log-every``
steps, so that a step never waits for the accelerator.

Per step, on the device, with no host sync:

* **non-finite guard**: the step is good when its loss is finite and (unless an fp16 loss scaler
  owns the gradients) its gradient norm is finite. A bad step is *skipped exactly*: the flag is
  handed to the fused AdamW kernel as ``found_inf`` (the mechanism torch's ``GradScaler`` uses), so
  neither the weights nor AdamW's moments nor its step count change; the learning-rate schedule
  still advances one step, as it did when the host skipped the call. Under fp16 the loss scaler
  keeps its own skip (an overflowing gradient is its business, counted as ``skipped_by_scaler``);
  a non-finite loss gives non-finite gradients, so the scaler skips that step too (it is counted
  in both ``skipped_nonfinite`` and ``skipped_by_scaler``).
* **clipping**: whether the gradient norm (before clipping) exceeded ``--grad-clip``.

`StepGuard.read` moves the flags of the steps since the last read to the host (one sync), counts
clipped and skipped steps, and names the first skipped step beyond ``--skip-nonfinite`` so that the
trainer can stop (the weights never took that step). The trainer reads at every log step, before
every dev evaluation, checkpoint and export, and at the end, so no checkpoint or exported model is
written past an unread bad step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class GuardReport:
    """What one `StepGuard.read` found: steps (1-based) whose loss / gradient was not finite, the
    number of clipped steps, and the last step's loss (None when nothing was pending)."""

    bad_loss: list[int] = field(default_factory=list)
    bad_gradient: list[int] = field(default_factory=list)
    clipped: int = 0
    last_loss: float | None = None

    @property
    def skipped(self) -> list[int]:
        return sorted(set(self.bad_loss) | set(self.bad_gradient))


class StepGuard:
    """Device-side flags of the steps not yet read (see module docstring)."""

    def __init__(self, max_norm: float, scaler_owns_gradients: bool = False) -> None:
        self.max_norm = max_norm
        self.scaler_owns_gradients = scaler_owns_gradients
        self._steps: list[int] = []
        self._flags: list[torch.Tensor] = []  # per step: [loss finite, gradient finite, clipped]
        self._losses: list[torch.Tensor] = []

    @property
    def pending(self) -> int:
        return len(self._steps)

    def check(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor, optimizer) -> None:
        """Record step ``step`` (1-based) and arm ``optimizer`` to skip it if it is bad. Call after
        clipping, before ``optimizer.step()``; call `disarm` after it."""
        loss = loss.detach().float()
        if grad_norm is None:  # a clip path that reports no norm: nothing to check or count
            grad_norm = torch.zeros((), device=loss.device)
        if hasattr(grad_norm, "full_tensor"):  # FSDP: a DTensor
            grad_norm = grad_norm.full_tensor()
        grad_norm = torch.as_tensor(grad_norm, device=loss.device).detach().float()
        loss_ok = torch.isfinite(loss)
        grad_ok = torch.isfinite(grad_norm)
        clipped = grad_norm > self.max_norm
        self._steps.append(step)
        self._flags.append(torch.stack([loss_ok, grad_ok, clipped]))
        self._losses.append(loss)
        good = loss_ok if self.scaler_owns_gradients else loss_ok & grad_ok
        if not self.scaler_owns_gradients:
            _inner(optimizer).found_inf = (~good).float()

    def disarm(self, optimizer) -> None:
        inner = _inner(optimizer)
        if hasattr(inner, "found_inf"):
            del inner.found_inf

    def read(self) -> GuardReport:
        """Bring the pending flags to the host (one sync) and forget them."""
        report = GuardReport()
        if not self._steps:
            return report
        flags = torch.stack(self._flags).tolist()
        report.last_loss = float(self._losses[-1].item())
        for step, (loss_ok, grad_ok, clipped) in zip(self._steps, flags, strict=True):
            if not loss_ok:
                report.bad_loss.append(step)
            elif not grad_ok and not self.scaler_owns_gradients:
                report.bad_gradient.append(step)
            report.clipped += bool(clipped) and bool(loss_ok and grad_ok)
        self._steps, self._flags, self._losses = [], [], []
        return report


def _inner(optimizer):
    """The torch optimizer inside accelerate's wrapper (or the optimizer itself)."""
    return getattr(optimizer, "optimizer", optimizer)
