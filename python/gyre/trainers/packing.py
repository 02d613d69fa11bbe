"""gyre rows → packed sequences under a token budget, for trainers that pack (varlen / flash-attention
``cu_seqlens``), keeping the loss contract (docs/format.md §6).

``gyre.trainers.packing(step, max_tokens=...)`` returns a list of :class:`Pack`: the step's rows laid
end to end, in row order (execution order, then draw order), a new pack whenever the next row would
exceed ``max_tokens``. Each pack holds:

* ``input_ids`` (int64, ``[T]``) and ``position_ids`` (int64, restarting at 0 at every row);
* ``cu_seqlens`` (int32, ``[rows + 1]``, 0 then the running row ends; ``max_seqlen`` the longest row);
* ``loss_mask`` (bool), ``coefficients`` (float64: ``loss_mask · weight / B``), ``advantages``
  (float64, the row's advantage; 0.0 when admitted without one) and ``old_log_probs`` (float64, 0.0 off targets; None when a row
  has no behaviour log-probs), all aligned with ``input_ids``: entry ``t`` is about *predicting*
  token ``t``, so a causal LM's logits at ``t - 1`` give its log-prob (shift inside each row only,
  never across a ``cu_seqlens`` boundary; a row's first token is never a target);
* ``rows`` (the rows' indices in the step) and ``executions``.

**How the contract survives.** The step's loss is ``Σ_packs Σ_t coefficients[t] · ℓ[t]``: a plain sum,
no division by the pack's (or micro-batch's, or rank's) token count. ``coefficients`` already hold
``1 / (L_i · B)`` with ``B`` the step's, so micro-batching the packs, or sharding the step first
(``step.shard(world_size=K)[rank]`` then packing each rank's rows), changes nothing but the order of
the sum. Packing never leaves the rows it is given: give it one optimizer step's rows
(``rows.steps(executions=N)``, or :func:`pack_steps`), so no execution is split across steps. A row
longer than ``max_tokens`` is an error naming its execution (truncating it would change ``L_i``).

**Prefix repeat and the hook for prefix-shared forward passes.** An execution's rows repeat its shared
prefixes (the system prompt, earlier turns). :meth:`Pack.prefix_tree` gives, per row, the earlier
row (in an order it returns) sharing its longest prefix and that prefix's length: a forward pass
that shares prefixes (AReaL's tree training, verl's prefix grouper) computes row ``k``'s first
``shared[k]`` tokens once, from ``parent[k]``'s KV cache, and only the rest anew. Its per-token
log-probs must still be laid out as ``input_ids`` is, so the loss above is unchanged.
``Pack.prefix_repeat`` (and :func:`prefix_repeat` over a step) is row tokens / distinct prefix-tree
tokens: how many times a plain packed forward pass computes each distinct token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import _common


@dataclass
class Pack:
    """One packed sequence; every per-token array is aligned with ``input_ids``."""

    input_ids: np.ndarray
    position_ids: np.ndarray
    cu_seqlens: np.ndarray
    max_seqlen: int
    loss_mask: np.ndarray
    coefficients: np.ndarray
    advantages: np.ndarray
    old_log_probs: Optional[np.ndarray]
    rows: np.ndarray
    executions: List[str]

    def segments(self) -> List[np.ndarray]:
        """The pack's rows' tokens, one array each (views of ``input_ids``)."""
        c = self.cu_seqlens
        return [self.input_ids[c[k] : c[k + 1]] for k in range(len(c) - 1)]

    def prefix_tree(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(order, parent, shared)``, one entry per row of the pack (indices into the pack's rows):
        compute rows in ``order``; row ``order[j]`` shares its first ``shared[j]`` tokens with row
        ``parent[j]`` (-1, 0 for the first), computed earlier. ``Σ (len - shared)`` is the number of
        distinct prefix-tree tokens of the pack."""
        return _prefix_tree(self.segments())

    @property
    def prefix_repeat(self) -> float:
        """Row tokens / distinct prefix-tree tokens of this pack (1.0 when nothing is shared)."""
        return _repeat(self.segments())


def adapt(rows: Any, *, max_tokens: int, dummy: str = "short") -> List[Pack]:
    """``rows`` (one step, or one rank's shard of it) packed under ``max_tokens``; see the module
    docstring. ``dummy`` as in ``gyre.trainers.layout``."""
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, not {max_tokens}")
    s = _common.step_rows(rows, need_advantage=False, dummy=dummy)
    bins: List[List[int]] = []
    used = max_tokens
    for k, r in enumerate(s.rows):
        n = len(r["tokens"])
        if n > max_tokens:
            raise ValueError(
                f"row {k} (execution {r['execution']!r}, draw {r['draw']}) has {n} tokens, more than "
                f"max_tokens={max_tokens}: raise the budget (truncating it would change its L_i)"
            )
        if used + n > max_tokens:
            bins.append([])
            used = 0
        bins[-1].append(k)
        used += n
    return [_pack(s, ks) for ks in bins]


def pack_steps(rows: Any, *, executions: int, max_tokens: int, dummy: str = "short") -> List[List[Pack]]:
    """Per optimizer step of ``executions`` whole executions (``rows.steps``), its packs."""
    return [adapt(step, max_tokens=max_tokens, dummy=dummy) for step in rows.steps(executions=executions)]


def prefix_repeat(rows: Any) -> float:
    """Row tokens / distinct prefix-tree tokens over ``rows`` (a step, a shard or a batch)."""
    return _repeat([r["tokens"] for r in rows.iter(numpy=True)])


def _pack(s: _common.StepRows, ks: List[int]) -> Pack:
    recs = [s.rows[k] for k in ks]
    lens = np.array([len(r["tokens"]) for r in recs], dtype=np.int64)
    cu = np.zeros(len(recs) + 1, dtype=np.int32)
    np.cumsum(lens, out=cu[1:])
    total = int(cu[-1])
    input_ids = np.concatenate([r["tokens"] for r in recs]).astype(np.int64)
    position_ids = np.arange(total, dtype=np.int64) - np.repeat(cu[:-1].astype(np.int64), lens)
    loss_mask = np.zeros(total, dtype=bool)
    coefficients = np.zeros(total)
    advantages = np.zeros(total)
    with_logprobs = all(r["logprobs"] is not None for r in recs)
    old_log_probs = np.zeros(total) if with_logprobs else None
    for k, r, start in zip(ks, recs, cu[:-1]):
        p = int(r["prompt_len"])
        lo, hi = int(start) + p, int(start) + len(r["tokens"])
        mask = r["loss_mask"] != 0
        if p == 0 and mask.size and mask[0]:
            raise ValueError(
                f"row {k} (execution {r['execution']!r}) has a target at position 0: nothing in the "
                "row predicts it, and packed it would be predicted from the previous row"
            )
        loss_mask[lo:hi] = mask
        coefficients[lo:hi] = s.coefficients[k]
        advantages[lo:hi] = _common.advantage(r)
        if old_log_probs is not None:
            old_log_probs[lo:hi] = np.where(mask, r["logprobs"], 0.0)
    return Pack(
        input_ids=input_ids,
        position_ids=position_ids,
        cu_seqlens=cu,
        max_seqlen=int(lens.max()),
        loss_mask=loss_mask,
        coefficients=coefficients,
        advantages=advantages,
        old_log_probs=old_log_probs,
        rows=np.array(ks, dtype=np.int64),
        executions=[str(r["execution"]) for r in recs],
    )


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def _prefix_tree(seqs: Sequence[np.ndarray]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    # In lexicographic order, a sequence's longest common prefix with any earlier one is with its
    # predecessor, so the chain of predecessors is the prefix tree's node count exactly.
    order = sorted(range(len(seqs)), key=lambda k: seqs[k].tolist())
    parent = np.full(len(seqs), -1, dtype=np.int64)
    shared = np.zeros(len(seqs), dtype=np.int64)
    for j in range(1, len(order)):
        parent[j] = order[j - 1]
        shared[j] = _common_prefix(seqs[order[j - 1]], seqs[order[j]])
    return np.array(order, dtype=np.int64), parent, shared


def _repeat(seqs: Sequence[np.ndarray]) -> float:
    _, _, shared = _prefix_tree(seqs)
    total = sum(len(s) for s in seqs)
    distinct = total - int(shared.sum())
    return 1.0 if distinct == 0 else total / distinct


_common.callable_module(__name__)
