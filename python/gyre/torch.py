"""The paper's loss in PyTorch: a per-token loss reduced with gyre's coefficients (docs/format.md §6).

Each admitted target ``t`` of execution ``i`` has coefficient ``1 / (L_i · B)``; every other
token 0 (``rows.coefficients()``: ``loss_mask * weight / B`` per row over ``tokens[prompt_len:]``,
computed by the engine). The loss of a step is ``Σ_rows Σ_t c_t · ℓ_t``, whatever ``ℓ`` is
(a clipped PPO surrogate with importance ratios, a cross-entropy, a KL term): importance
weighting and clipping change ``ℓ_t``, never the denominator. Use it with any trainer that lets
you supply the reduction::

    import gyre, gyre.torch
    rows = gyre.load("run.jsonl").admit()
    for step in rows.steps(executions=64):               # one optimizer step each
        shard = step.shard(world_size=world)[rank]      # this rank's whole executions
        c = gyre.torch.coefficients(shard, device="cuda")     # [rows, response width]
        for mb in micro_batches(range(len(shard))):     # any split: the sum is the same
            per_token = my_per_token_loss(shard, mb)    # [len(mb), width], response-aligned
            loss = gyre.torch.loss(per_token, c[mb], world_size=world)
            loss.backward()
        optimizer.step(); optimizer.zero_grad()

Micro-batching: the loss is a sum, so splitting a rank's rows into micro-batches in any way
and summing (accumulating) their gradients gives the rank's gradient exactly; do not divide by
the number of micro-batches. Data parallelism: DDP and FSDP average gradients over ranks, so
``loss(..., world_size=K)`` multiplies by ``K`` and the averaged gradient is the step's.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np
import torch

__all__ = ["coefficients", "loss", "pad"]


def pad(
    arrays: Sequence[Any],
    *,
    width: Optional[int] = None,
    value: float = 0,
    left: bool = False,
    dtype: Optional[torch.dtype] = None,
    device: Union[None, str, torch.device] = None,
) -> torch.Tensor:
    """Stacks 1-D arrays into a ``[len(arrays), width]`` tensor, padded with ``value`` on the
    right (``left=True``: on the left). ``width`` defaults to the longest array."""
    lengths = [len(a) for a in arrays]
    w = max(lengths, default=0) if width is None else width
    if any(n > w for n in lengths):
        raise ValueError(f"an array of {max(lengths)} entries does not fit width {w}")
    if dtype is None:
        dtype = torch.float32
    out = torch.full((len(arrays), w), value, dtype=dtype)
    for k, a in enumerate(arrays):
        n = len(a)
        if n:
            t = torch.as_tensor(np.asarray(a)).to(dtype)
            if left:
                out[k, w - n :] = t
            else:
                out[k, :n] = t
    return out if device is None else out.to(device)


def coefficients(
    rows: Any,
    *,
    width: Optional[int] = None,
    dtype: torch.dtype = torch.float32,
    device: Union[None, str, torch.device] = None,
) -> torch.Tensor:
    """``rows.coefficients()`` as a ``[len(rows), width]`` tensor: row ``k``'s response
    coefficients from column 0 on (aligned with ``tokens[prompt_len:]``), zeros after."""
    return pad(rows.coefficients(), width=width, dtype=dtype, device=device)


def loss(
    per_token_loss: Union[torch.Tensor, Sequence[torch.Tensor]],
    coefficients: Union[torch.Tensor, Sequence[Any]],
    *,
    world_size: int = 1,
) -> torch.Tensor:
    """``world_size · Σ_rows Σ_t c_t · ℓ_t``: the step's loss (docs/format.md §6) on one rank.

    ``per_token_loss`` is a ``[rows, width]`` tensor aligned with ``coefficients`` (both from
    the first response token; ``coefficients`` may be wider or narrower, the product is taken on
    the common width, and positions past a row's response must have coefficient 0), or one 1-D
    tensor per row with the matching 1-D coefficients. The result keeps ``per_token_loss``'s
    dtype and device and its graph.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be a positive integer, not {world_size}")
    if isinstance(per_token_loss, torch.Tensor):
        c = coefficients
        if not isinstance(c, torch.Tensor):
            c = pad(c, dtype=per_token_loss.dtype)
        c = c.to(device=per_token_loss.device, dtype=per_token_loss.dtype)
        if c.dim() != 2 or per_token_loss.dim() != 2 or c.shape[0] != per_token_loss.shape[0]:
            raise ValueError(
                f"per_token_loss {tuple(per_token_loss.shape)} and coefficients {tuple(c.shape)} "
                "must both be [rows, width] with the same rows"
            )
        w = min(c.shape[1], per_token_loss.shape[1])
        if c.shape[1] > w and bool((c[:, w:] != 0).any()):
            raise ValueError("coefficients past the loss's width are not zero: the loss is cut short")
        total = (per_token_loss[:, :w] * c[:, :w]).sum()
    else:
        losses = list(per_token_loss)
        coefs = list(coefficients)
        if len(losses) != len(coefs):
            raise ValueError(f"{len(losses)} per-token losses but {len(coefs)} coefficient rows")
        if not losses:
            return torch.zeros(())
        parts = []
        for k, (l, c) in enumerate(zip(losses, coefs)):
            ct = torch.as_tensor(np.asarray(c) if not isinstance(c, torch.Tensor) else c)
            ct = ct.to(device=l.device, dtype=l.dtype)
            if ct.shape != l.shape:
                raise ValueError(f"row {k}: loss {tuple(l.shape)} but coefficients {tuple(ct.shape)}")
            parts.append((l * ct).sum())
        total = torch.stack(parts).sum()
    return total * world_size
