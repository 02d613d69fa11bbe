"""gyre rows → prime-rl ``TrainingSample``-shaped dicts.

``gyre.trainers.prime_rl(step)`` returns one dict per row over the full sequence (prime-rl has no
prompt/completion split): ``token_ids``, ``mask`` (the row's targets), ``logprobs`` (0.0 where
there is no behaviour log-prob; the row's are required), ``temperatures`` (``temperature``),
``advantages`` (the execution's advantage on every token), ``rl_weights`` and ``env_name``.

**How the contract survives.** prime-rl (read at PrimeIntellect-ai/prime-rl 559b4477,
``src/prime_rl/trainer/rl/loss.py`` ``compute_loss`` and ``train.py``) multiplies each token's rl
loss by its ``rl_weights`` entry, sums, and divides by ``rl_scale``: the number of tokens with
``mask`` and a non-zero weight over the whole step (all micro-batches and ranks). With
``rl_weights`` = ``weight · N / B`` on targets (``N`` = the step's targets) the loss is
``Σ (weight/B) ℓ`` = docs/format.md §6. Settings: one step's rows per trainer step; its KL and ce components
keep their own normalisation.
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from . import _common


def adapt(rows: Any, *, temperature: float = 1.0, env_name: str = "gyre") -> List[Dict[str, Any]]:
    """``rows`` (one step) as prime-rl training samples; see the module docstring."""
    s = _common.step_rows(rows)
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
                "temperatures": [float(temperature)] * total,
                "advantages": [_common.advantage(r)] * total,
                "rl_weights": weights.tolist(),
                "env_name": env_name,
            }
        )
    return out


_common.callable_module(__name__)
