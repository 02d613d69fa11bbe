"""gyre rows → SkyRL's step-wise ``GeneratorOutput`` (skyrl-train), for one training step.

``gyre.trainers.skyrl(step)`` returns the dict a custom generator's ``generate`` returns:
``prompt_token_ids``, ``response_ids``, ``rewards`` (token-level lists), ``loss_masks``,
``rollout_logprobs`` (``None`` when a row has none), ``trajectory_ids`` and ``is_last_step``
(step-wise: every row is one step of its execution's trajectory), ``stop_reasons``,
``rollout_metrics``. Row ``k`` is ``step[k]``.

**How the contract survives.** SkyRL scales advantages per mini-batch
(``apply_loss_reduction_to_advantages_minibatch``) and then sums the per-token policy loss over
micro-batches and ranks (the DP all-reduce is corrected to a sum). The adapter writes each target
token's reward as ``A · c · D``, ``c`` the engine's coefficient (``loss_mask · weight / B``) and
``D`` the denominator of ``loss_reduction`` over the step (``token_mean``: the step's targets;
``sequence_mean``: the step's rows × the row's targets; ``seq_mean_token_sum_norm``: the step's
rows × ``max_seq_len``), and :func:`advantage_estimator` passes those token rewards through as the
advantages. The clipped surrogate is linear in a positive advantage scale, so the loss is the
contract's for any ratios and clipping.

Settings: ``algorithm.advantage_estimator: gyre`` after :func:`register` (SkyRL's own GRPO would
sum and re-normalise the rewards by group), ``advantage_batch_normalize: false``,
``loss_reduction`` as given here, ``step_wise_trajectories: true``, one mini-batch per step
(``policy_mini_batch_size`` = ``train_batch_size``, both the step's executions: its trajectories
are the executions, ``trajectory_ids`` keyed by execution). Not reweighted: ``use_kl_loss`` and the
entropy loss. Refused: ``token_mean_legacy`` (it divides by each micro-batch's tokens) and
``prompt_mean`` (its denominator is per prompt group, which gyre's executions are not).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import numpy as np

from . import _common

REDUCTIONS = ("token_mean", "sequence_mean", "seq_mean_token_sum_norm")


def _scale(reduction: str, mask_sum: int, s: _common.StepRows, max_seq_len: Optional[int]) -> float:
    if reduction == "token_mean":
        return float(max(s.step_targets, 1))
    if reduction == "sequence_mean":
        return float(s.step_rows) * max(mask_sum, 1)
    if reduction == "seq_mean_token_sum_norm":
        if max_seq_len is None:
            raise ValueError("seq_mean_token_sum_norm divides by max_seq_len: give it")
        return float(s.step_rows) * float(max_seq_len)
    raise ValueError(
        f"loss_reduction must be one of {', '.join(REDUCTIONS)}, not {reduction!r} "
        "(token_mean_legacy and prompt_mean cannot keep gyre's per-execution weights)"
    )


def adapt(
    rows: Any,
    *,
    loss_reduction: str = "token_mean",
    max_seq_len: Optional[int] = None,
    split: Union[str, int] = "first_target",
    dummy: str = "short",
) -> Dict[str, Any]:
    """``rows`` (one step) as SkyRL's ``GeneratorOutput``; see the module docstring. ``split``
    and ``dummy`` lay the rows out (``gyre.trainers.layout``)."""
    s = _common.step_rows(rows, split=split, dummy=dummy)
    recs = s.rows
    rewards: List[List[float]] = []
    for r, c in zip(recs, s.coefficients):
        d = _scale(loss_reduction, int(r["loss_mask"].sum()), s, max_seq_len)
        rewards.append((_common.advantage(r) * c * d).tolist())
    lps = _common.logprobs_or_none(recs)
    trajectory_ids = _trajectory_ids(recs)
    last = [k + 1 == len(recs) or recs[k + 1]["execution"] != r["execution"] for k, r in enumerate(recs)]
    return {
        "prompt_token_ids": [_common.prompt(r).tolist() for r in recs],
        "response_ids": [_common.response(r).tolist() for r in recs],
        "rewards": rewards,
        "loss_masks": [r["loss_mask"].astype(np.int64).tolist() for r in recs],
        "stop_reasons": ["stop"] * len(recs),
        "rollout_metrics": {"gyre/batch_executions": s.batch_executions},
        "rollout_logprobs": None if lps is None else [lp.tolist() for lp in lps],
        "trajectory_ids": trajectory_ids,
        "is_last_step": last,
    }


def _trajectory_ids(recs: List[dict]) -> List[Any]:
    """One trajectory per execution (instance = its group, repetition = its place in it)."""
    try:
        from skyrl.train.generators.base import TrajectoryID  # type: ignore[import-not-found]
    except Exception:  # SkyRL absent (or its package needs another Python): plain dicts
        TrajectoryID = None
    place: Dict[str, Dict[str, int]] = {}
    out = []
    for r in recs:
        group = _common.uid(r)
        reps = place.setdefault(group, {})
        rep = reps.setdefault(str(r["execution"]), len(reps))
        fields = {"instance_id": group, "repetition_id": rep}
        out.append(TrajectoryID(**fields) if TrajectoryID is not None else fields)
    return out


def advantage_estimator(token_level_rewards: Any, response_mask: Any, index: Any = None, **kwargs: Any) -> Any:
    """SkyRL advantage estimator ``gyre``: the adapter's token rewards are the advantages
    (already ``A · c · D``), returned as ``(advantages, returns)``."""
    adv = token_level_rewards * response_mask
    return adv, adv


def register(name: str = "gyre") -> None:
    """Registers :func:`advantage_estimator` with SkyRL as ``name``."""
    from skyrl.backends.skyrl_train.utils.ppo_utils import AdvantageEstimatorRegistry  # type: ignore

    AdvantageEstimatorRegistry.register(name, advantage_estimator)


_common.callable_module(__name__)
