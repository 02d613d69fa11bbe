"""gyre rows → verl's ``DataProto`` for ``actor.update_policy`` (PPO/GRPO clipped surrogate).

``gyre.trainers.verl(step)`` returns a ``verl.DataProto`` when verl is importable (else a dict with
the same three parts): row ``k`` is ``step[k]``.

* ``batch``: ``prompts`` (left-padded), ``responses`` (right-padded), ``response_mask`` (the
  loss mask: 1 exactly at the row's targets), ``input_ids`` = prompts + responses,
  ``attention_mask``, ``position_ids``, ``old_log_probs`` (the recorded behaviour log-probs,
  when every row has them) and token-level ``advantages``;
* ``non_tensor_batch``: ``uid`` (the GRPO group) and ``execution`` (numpy object arrays);
* ``meta_info``: ``loss_agg_mode`` and ``agg_loss_kwargs`` (``batch_num_tokens``,
  ``global_batch_size``, ``dp_size``, as ``verl.trainer.ppo.core_algos.agg_loss`` takes them).

**How the contract survives.** The clipped surrogate ``-min(r·A, clip(r)·A)`` (and verl's dual
clip) is linear in a positive scale of ``A``, so the adapter writes, per target token,
``A · c · D``: ``c`` = ``loss_mask · weight / B`` (the engine's coefficient) and ``D`` the
denominator ``agg_loss`` will divide by, so that the two cancel:

=========================  ===================================================================
``loss_agg_mode``          ``D``
=========================  ===================================================================
``token-mean`` (default)   ``batch_num_tokens``: the step's targets (all ranks)
``token-sum``              1
``seq-mean-token-sum``     ``global_batch_size``: the step's rows (all ranks)
``seq-mean-token-mean``    ``global_batch_size · targets of the row``
``seq-mean-token-sum-norm`` ``global_batch_size · loss_scale_factor`` (must be given)
=========================  ===================================================================

Settings this needs: one ``DataProto`` per optimizer step (``ppo_mini_batch_size`` = the step's
rows, so verl's mini-batch is gyre's step; any ``ppo_micro_batch_size_per_gpu``); the global
``batch_num_tokens`` / ``global_batch_size`` that current verl passes to ``agg_loss`` (what
``agg_loss_kwargs`` holds); the advantage estimator's output replaced by these advantages
(skip ``compute_advantage``, or register an estimator that returns them); ``use_kl_loss`` and
the entropy bonus are not reweighted (they keep verl's own normalisation). What breaks it: the
legacy per-micro-batch token mean (``agg_loss`` without ``batch_num_tokens``, then averaged over
micro-batches) divides by each micro-batch's own token count, which no advantage scale can undo;
mini-batches that cut a step (verl ``shuffle`` across steps, ``ppo_mini_batch_size`` smaller than
the step) change ``D`` and split executions.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

import numpy as np

from . import _common

MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def _scale(mode: str, mask_sum: int, s: _common.StepRows, loss_scale_factor: Optional[float]) -> float:
    if mode == "token-mean":
        return float(max(s.step_targets, 1))
    if mode == "token-sum":
        return 1.0
    if mode == "seq-mean-token-sum":
        return float(s.step_rows)
    if mode == "seq-mean-token-mean":
        # agg_loss divides by `mask_sum + 1e-8` computed from the int64 response_mask: a float32
        # tensor, in which that sum is mask_sum exactly (below 2**24 tokens per row).
        return float(s.step_rows) * max(mask_sum, 1)
    if mode == "seq-mean-token-sum-norm":
        if loss_scale_factor is None:
            raise ValueError(
                "seq-mean-token-sum-norm divides by loss_scale_factor: give it (verl's default, the "
                "padded response width, changes with every batch)"
            )
        return float(s.step_rows) * float(loss_scale_factor)
    raise ValueError(f"loss_agg_mode must be one of {', '.join(MODES)}, not {mode!r}")


def adapt(
    rows: Any,
    *,
    loss_agg_mode: str = "token-mean",
    dp_size: int = 1,
    loss_scale_factor: Optional[float] = None,
    pad_token_id: int = 0,
    dtype: Any = None,
    dataproto: Optional[bool] = None,
    split: Union[str, int] = "first_target",
    dummy: str = "short",
) -> Any:
    """``rows`` (one step, or one rank's shard of a step) as verl's training batch; see the
    module docstring. ``dtype`` is the float dtype (``torch.float32`` default);
    ``dataproto=False`` returns a plain dict even when verl is importable. ``split`` and
    ``dummy`` lay the rows out (``gyre.trainers.layout``: ``split="min_padding"`` for the
    fewest padded cells)."""
    import torch

    from .. import torch as gtorch

    fdtype = torch.float32 if dtype is None else dtype
    s = _common.step_rows(rows, split=split, dummy=dummy)
    recs = s.rows
    prompts = [_common.prompt(r).astype(np.int64) for r in recs]
    responses = [_common.response(r).astype(np.int64) for r in recs]
    p_w = max((len(p) for p in prompts), default=0)
    r_w = max((len(r) for r in responses), default=0)
    prompts_t = gtorch.pad(prompts, width=p_w, value=pad_token_id, left=True, dtype=torch.int64)
    responses_t = gtorch.pad(responses, width=r_w, value=pad_token_id, dtype=torch.int64)
    prompt_attn = gtorch.pad([np.ones(len(p)) for p in prompts], width=p_w, left=True, dtype=torch.int64)
    response_attn = gtorch.pad([np.ones(len(r)) for r in responses], width=r_w, dtype=torch.int64)
    attention_mask = torch.cat([prompt_attn, response_attn], dim=1)
    position_ids = (torch.cumsum(attention_mask, dim=1) - 1).clamp(min=0)
    response_mask = gtorch.pad([r["loss_mask"] for r in recs], width=r_w, dtype=torch.int64)
    advantages = []
    for r, c in zip(recs, s.coefficients):
        d = _scale(loss_agg_mode, int(r["loss_mask"].sum()), s, loss_scale_factor)
        advantages.append(_common.advantage(r) * c * d)
    batch: Dict[str, Any] = {
        "prompts": prompts_t,
        "responses": responses_t,
        "response_mask": response_mask,
        "input_ids": torch.cat([prompts_t, responses_t], dim=1),
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "advantages": gtorch.pad(advantages, width=r_w, dtype=fdtype),
    }
    lps = _common.logprobs_or_none(recs)
    if lps is not None:
        batch["old_log_probs"] = gtorch.pad(lps, width=r_w, dtype=fdtype)
    non_tensor = {
        "uid": np.array([_common.uid(r) for r in recs], dtype=object),
        "execution": np.array([r["execution"] for r in recs], dtype=object),
    }
    kwargs: Dict[str, Any] = {
        "dp_size": dp_size,
        "batch_num_tokens": s.step_targets,
        "global_batch_size": s.step_rows,
    }
    if loss_scale_factor is not None:
        kwargs["loss_scale_factor"] = loss_scale_factor
    meta = {
        "loss_agg_mode": loss_agg_mode,
        "agg_loss_kwargs": kwargs,
        "gyre_batch_executions": s.batch_executions,
    }
    if dataproto is None or dataproto:
        try:
            from verl import DataProto
        except ImportError:
            if dataproto:
                raise
        else:
            return DataProto.from_dict(tensors=batch, non_tensors=non_tensor, meta_info=meta)
    return {"batch": batch, "non_tensor_batch": non_tensor, "meta_info": meta}


_common.callable_module(__name__)
