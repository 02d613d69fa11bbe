"""gyre rows → the inputs TRL's ``GRPOTrainer._compute_loss`` reads, as an overridden
``_generate_and_score_completions`` returns them.

``gyre.trainers.trl(step)`` returns a dict of tensors: ``prompt_ids`` / ``prompt_mask``
(left-padded), ``completion_ids`` / ``completion_mask`` (right-padded; the mask covers every real
completion token, since TRL also builds the attention mask from it), ``tool_mask`` (the loss mask:
TRL multiplies it into the loss mask, so only the row's targets are trained), token-level
``advantages`` (shape ``[rows, width]``, which ``_compute_loss`` accepts), ``old_per_token_logps``
(the recorded behaviour log-probs, when every row has them) and ``num_items_in_batch``.

**How the contract survives.** With ``loss_type="dapo"`` TRL divides the summed per-token loss by
``num_items_in_batch`` (per process, and per accumulation window when ``steps_per_generation``
equals ``gradient_accumulation_steps``, TRL's default), with no further division for gradient
accumulation; DDP averages over processes. So the loss of the generation batch is
``Σ ℓ_t / N`` with ``N`` the ``num_items_in_batch`` given. The adapter sets ``N`` to the step's
targets and writes each target's advantage as ``A · c · N`` (``c`` the engine's coefficient):
the clipped surrogate is linear in a positive advantage scale, so ``N`` cancels.

Settings: ``loss_type="dapo"``, ``steps_per_generation`` = ``gradient_accumulation_steps`` (one
optimizer step per generation batch = one gyre step), ``beta=0`` (TRL's KL term and the entropy
bonus are not reweighted), no ``top_entropy_quantile`` (< 1 masks tokens), no
``off_policy_mask_threshold``, ``importance_sampling_level="token"``. Per-sequence losses
(``grpo``, ``sapo``, ``luspo``: per-row means, then a micro-batch mean) and ``bnpo`` / ``dr_grpo``
(per-micro-batch denominators) weight each execution by its rows' lengths and the micro-batch
split: they break the contract.
"""

from __future__ import annotations

from typing import Any, Dict, Union

import numpy as np

from . import _common


def adapt(
    rows: Any,
    *,
    pad_token_id: int = 0,
    dtype: Any = None,
    device: Any = None,
    split: Union[str, int] = "first_target",
    dummy: str = "short",
) -> Dict[str, Any]:
    """``rows`` (one generation batch = one step; on several processes, the process's shard of
    it) as ``_generate_and_score_completions``' output; see the module docstring. ``split`` and
    ``dummy`` lay the rows out (``gyre.trainers.layout``)."""
    import torch

    from .. import torch as gtorch

    fdtype = torch.float32 if dtype is None else dtype
    s = _common.step_rows(rows, split=split, dummy=dummy)
    recs = s.rows
    n = float(max(s.step_targets, 1))
    prompts = [_common.prompt(r).astype(np.int64) for r in recs]
    completions = [_common.response(r).astype(np.int64) for r in recs]
    p_w = max((len(p) for p in prompts), default=0)
    c_w = max((len(c) for c in completions), default=0)
    out: Dict[str, Any] = {
        "prompt_ids": gtorch.pad(prompts, width=p_w, value=pad_token_id, left=True, dtype=torch.int64),
        "prompt_mask": gtorch.pad([np.ones(len(p)) for p in prompts], width=p_w, left=True, dtype=torch.int64),
        "completion_ids": gtorch.pad(completions, width=c_w, value=pad_token_id, dtype=torch.int64),
        "completion_mask": gtorch.pad([np.ones(len(c)) for c in completions], width=c_w, dtype=torch.int64),
        "tool_mask": gtorch.pad([r["loss_mask"] for r in recs], width=c_w, dtype=torch.int64),
        "advantages": gtorch.pad(
            [_common.advantage(r) * c * n for r, c in zip(recs, s.coefficients)], width=c_w, dtype=fdtype
        ),
        "num_items_in_batch": torch.tensor(n, dtype=fdtype),
    }
    lps = _common.logprobs_or_none(recs)
    if lps is not None:
        out["old_per_token_logps"] = gtorch.pad(lps, width=c_w, dtype=fdtype)
    if device is not None:
        out = {k: v.to(device) for k, v in out.items()}
    return out


_common.callable_module(__name__)
