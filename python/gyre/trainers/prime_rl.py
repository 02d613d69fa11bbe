"""gyre rows → prime-rl ``TrainingSample``-shaped dicts.

``gyre.trainers.prime_rl(step)`` returns one dict per row over the full sequence (prime-rl has no
prompt/completion split): ``token_ids``, ``mask`` (the row's targets), ``logprobs`` (0.0 where
there is no behaviour log-prob; the row's are required), ``temperatures`` (per token),
``advantages`` (the execution's advantage on every token), ``rl_weights`` and ``env_name``.

**How the contract survives.** prime-rl (read at PrimeIntellect-ai/prime-rl 559b4477,
``src/prime_rl/trainer/rl/loss.py`` ``compute_loss`` and ``train.py``) multiplies each token's rl
loss by its ``rl_weights`` entry, sums, and divides by ``rl_scale``: the number of tokens with
``mask`` and a non-zero weight over the whole step (all micro-batches and ranks). With
``rl_weights`` = ``weight · N / B`` on targets (``N`` = the step's targets) the loss is
``Σ (weight/B) ℓ`` = docs/format.md §6. Settings: one step's rows per trainer step; its KL and ce components
keep their own normalisation.

**Temperatures.** prime-rl divides the trainer's logits by each token's ``temperatures`` entry
before its log-softmax (``train.py``, and the fused lm head in ``models/layers/lm_head.py``), so a
target's entry must be the temperature it was sampled at, or the trainer's log-probs are not the
behaviour policy's and every importance ratio is off. Each target gets its run's recorded
temperature (``row["targets"][k]["temperature"]``, from ``meta.sampling.temperature``); a target
whose request recorded none gets ``temperature=`` (the server's default you sampled with) and is an
error without it; a temperature of 0 (greedy) is an error (prime-rl would divide by it). Tokens
that are not targets are masked out of the loss, so theirs is a don't-care: the row's temperature
when it has one, else 1.0 (what prime-rl pads with).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from . import _common


def token_temperatures(row: Dict[str, Any], fallback: Optional[float]) -> np.ndarray:
    """Per token of ``row["tokens"]``: each target's sampling temperature (its run's, else
    ``fallback``), the row's (else 1.0) elsewhere; see the module docstring."""
    where = row["temperature"] if row["temperature"] is not None else 1.0
    temps = np.full(len(row["tokens"]), float(where))
    for run in row["targets"]:
        t = run["temperature"] if run["temperature"] is not None else fallback
        if t is None:
            raise ValueError(
                f"execution {row['execution']!r}, request {run['request']!r}: no sampling temperature "
                "recorded (meta.sampling.temperature); pass temperature= (the server's default it was "
                "sampled with)"
            )
        if not t > 0:
            raise ValueError(
                f"execution {row['execution']!r}, request {run['request']!r}: sampled at temperature "
                f"{t}; prime-rl divides logits by the temperature, so greedy samples cannot be trained on"
            )
        temps[run["pos"] : run["pos"] + run["len"]] = t
    return temps


def adapt(
    rows: Any, *, temperature: Optional[float] = None, env_name: str = "gyre", dummy: str = "short"
) -> List[Dict[str, Any]]:
    """``rows`` (one step) as prime-rl training samples; ``temperature`` is used only for targets
    whose request recorded none; ``dummy`` as in ``gyre.trainers.layout``. See the module
    docstring."""
    s = _common.step_rows(rows, dummy=dummy)
    n = float(max(s.step_targets, 1))
    out = []
    for r, c in zip(s.rows, s.coefficients):
        p = r["prompt_len"]
        total = len(r["tokens"])
        if r["logprobs"] is None:
            raise ValueError(f"row of execution {r['execution']!r} has no behaviour log-probs: prime-rl needs them")
        mask = np.zeros(total, dtype=bool)
        mask[p:] = r["loss_mask"] != 0
        weights = np.zeros(total)
        weights[p:] = c * n
        logprobs = np.zeros(total)
        logprobs[p:] = r["logprobs"]
        out.append(
            {
                "token_ids": r["tokens"].astype(np.int64).tolist(),
                "mask": mask.tolist(),
                "logprobs": logprobs.tolist(),
                "temperatures": token_temperatures(r, temperature).tolist(),
                "advantages": [_common.advantage(r)] * total,
                "rl_weights": weights.tolist(),
                "env_name": env_name,
            }
        )
    return out


_common.callable_module(__name__)
