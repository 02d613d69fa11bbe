"""gyre rows → slime ``Sample``\\ s, and the reward post-processing hook.

``gyre.trainers.slime(step)`` returns one sample per row (a ``slime.utils.types.Sample`` when slime
is importable, else a dict of the same fields): ``tokens`` (prompt and response),
``response_length``, ``loss_mask`` (the row's targets), ``rollout_log_probs`` (``None`` when the row
has none), ``reward`` (the execution's reward), ``rollout_id`` (the execution, as an int: rows of
one execution share it), ``group_index``, ``index`` and ``metadata`` (``gyre_execution``,
``gyre_advantage``, ``gyre_batch_executions``).

**How the contract survives.** slime (read at THUDM/slime 624b824a,
``slime/ray/rollout.py`` and ``slime/backends/megatron_utils/cp_utils.py`` ``get_sum_of_sample_mean``,
``loss.py``) divides each sample's masked token sum by ``rollout_mask_sums``, the loss-mask total of
every sample with the same ``rollout_id`` in the step, then scales by
``num_microbatches / step_global_batch_size`` (the step's rollout count) and Megatron averages over
micro-batches and data-parallel ranks: the loss is ``(1/R) Σ_rollouts (1/L_r) Σ ℓ``. With
``rollout_id`` = execution, ``L_r`` is ``L_i`` and ``R`` is ``B`` (each counted execution has a row,
a dummy's with no target), so this is docs/format.md §6 without changing any token's weight.

Settings: ``--custom-reward-post-process-path gyre.trainers.slime.reward_post_process`` (the
advantages are gyre's, so slime's group normalisation is skipped), ``--advantage-estimator grpo``
(it broadcasts the post-processed reward to the tokens), ``--global-batch-size`` = the step's
executions. What breaks it: ``--calculate-per-token-loss`` (a global token mean: every execution
weighs by its token count), a ``rollout_id`` per sample rather than per execution.
"""

from __future__ import annotations

from typing import Any, List, Tuple

from . import _common


def adapt(rows: Any, *, dummy: str = "short") -> List[Any]:
    """``rows`` (one step) as slime samples; see the module docstring. ``dummy`` as in
    ``gyre.trainers.layout``."""
    s = _common.step_rows(rows, dummy=dummy)
    try:
        from slime.utils.types import Sample  # type: ignore[import-not-found]
    except Exception:
        Sample = None
    ids: dict = {}
    groups: dict = {}
    out = []
    for k, r in enumerate(s.rows):
        fields = {
            "group_index": groups.setdefault(_common.uid(r), len(groups)),
            "index": k,
            "rollout_id": ids.setdefault(r["execution"], len(ids)),
            "tokens": r["tokens"].tolist(),
            "response_length": len(r["tokens"]) - r["prompt_len"],
            "loss_mask": r["loss_mask"].astype(int).tolist(),
            "rollout_log_probs": None if r["logprobs"] is None else r["logprobs"].tolist(),
            "reward": float(r["reward"]),
            "metadata": {
                "gyre_execution": r["execution"],
                "gyre_advantage": _common.advantage(r),
                "gyre_batch_executions": s.batch_executions,
            },
        }
        out.append(Sample(**fields) if Sample is not None else fields)
    return out


def reward_post_process(args: Any, samples: List[Any]) -> Tuple[List[float], List[float]]:
    """slime's ``custom_reward_post_process`` hook: the raw rewards, and gyre's advantages as
    the rewards slime trains on."""

    def get(sample: Any, key: str) -> Any:
        return sample[key] if isinstance(sample, dict) else getattr(sample, key)

    raw = [float(get(x, "reward")) for x in samples]
    return raw, [float(get(x, "metadata")["gyre_advantage"]) for x in samples]


_common.callable_module(__name__)
