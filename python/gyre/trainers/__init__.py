"""Adapters from gyre's admitted rows to what each trainer's training step consumes, keeping the
loss contract (docs/format.md §6): every target of execution ``i`` weighs ``1 / (L_i · B)`` in the step's
loss, whatever the trainer's own aggregation, micro-batching and data parallelism.

One module each, each callable (``gyre.trainers.verl(rows)``) and with the same function as
``adapt`` (``gyre.trainers.verl.adapt(rows)``, for type checkers):

* ``verl``: a ``DataProto`` (token-level advantages with the coefficient folded in);
* ``slime``: ``Sample``\\ s with ``rollout_id`` = execution, and the reward post-processing hook;
* ``skyrl``: a step-wise ``GeneratorOutput`` and the ``gyre`` advantage estimator;
* ``prime_rl``: ``TrainingSample``-shaped dicts with ``rl_weights`` = ``weight · N / B``;
* ``trl``: the inputs an overridden ``GRPOTrainer._generate_and_score_completions`` returns;
* ``packing``: packed sequences under a token budget (``cu_seqlens``, per-row ``position_ids``,
  coefficients aligned), with the prefix-repeat figure and a hook for prefix-shared forward passes;
* ``tree``: tree packs, each shared prefix computed once (``parent``, per-target positions, the
  tree's attention mask for SDPA, Hugging Face models and FlexAttention).

Give each adapter one optimizer step's rows (``rows.steps(executions=N)``; a whole batch is one
step) or one rank's shard of a step (``step.shard(world_size=K)[rank]``). docs/trainers.md has,
per trainer, the settings to use and the ones that break the contract.
"""


from typing import Any, Dict, List, Tuple, Union

import numpy as np

from . import _common
from ._common import DUMMIES, SPLITS


def layout(
    rows: Any, *, split: Union[str, int] = "first_target", dummy: str = "short"
) -> Tuple[List[dict], List[np.ndarray]]:
    """``rows``' NumPy rows and coefficients laid out as the adapters lay them out: ``dummy``
    (``"short"``: a dummy's placeholder cut to one prompt and one response token; ``"full"``) and
    ``split`` (``"first_target"``, ``"min_padding"`` or a prompt width ``P`` ≥ 1: the
    prompt/response boundary moved earlier for padded ``(prompt | response)`` trainers). Targets,
    weights and coefficients are never changed; tokens moved into a response are not targets."""
    s = _common.step_rows(rows, need_advantage=False, split=split, dummy=dummy)
    return s.rows, s.coefficients


def padding(rows: Any, *, split: Union[str, int] = "first_target", dummy: str = "short") -> Dict[str, Any]:
    """What a padded ``(prompt | response)`` batch of ``rows`` costs under a layout (see
    :func:`layout`): ``real`` and ``padded`` token cells and ``fill`` (their ratio),
    ``prompt_width`` and ``response_width``, and ``dummy_tokens`` (forward tokens of dummy rows,
    which have no gradient)."""
    recs, _ = layout(rows, split=split, dummy=dummy)
    real, padded = _common.padded_cells(recs)
    return {
        "real": real,
        "padded": padded,
        "fill": real / padded if padded else 1.0,
        "prompt_width": max((int(r["prompt_len"]) for r in recs), default=0),
        "response_width": max((len(r["tokens"]) - int(r["prompt_len"]) for r in recs), default=0),
        "dummy_tokens": sum(len(r["tokens"]) for r in recs if r["dummy"]),
    }


# Imported here so that every adapter is an attribute of the package (`gyre.trainers.verl(rows)`
# after `import gyre`); each imports its trainer only when it runs.
from . import packing, prime_rl, skyrl, slime, tree, trl, verl  # noqa: E402

__all__ = [
    "DUMMIES",
    "SPLITS",
    "layout",
    "packing",
    "padding",
    "prime_rl",
    "skyrl",
    "slime",
    "tree",
    "trl",
    "verl",
]
