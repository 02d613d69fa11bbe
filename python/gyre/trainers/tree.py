"""gyre rows → tree packs: one optimizer step's rows merged into their prefix tree, so a trainer's
forward and backward compute each shared prefix once, with the same log-probs, loss and gradient
as flat rows (docs/trainers.md, "Tree packs").

``gyre.trainers.tree(step, max_tokens=N)`` returns a list of :class:`TreePack` (a
:class:`TreePacks`, which also holds the step's cost figures). The engine lays each tree out:

* ``input_ids`` (int64, ``[T]``): every distinct (prefix, token) of the step's rows once, in
  depth-first order, so each row's tokens appear in ascending order along its path;
* ``position_ids`` (int64): a token's depth in its rows (its offset in every row through it);
* ``parent`` (int64): the index of a token's parent, -1 for a root. A token attends to itself and
  its ancestors (:meth:`TreePack.attention_mask`); ``subtree_end[i]`` is one past the last
  descendant of ``i`` (the subtree is ``i..subtree_end[i]``), so that mask is
  ``k <= q < subtree_end[k]``;
* per target: ``target_row`` (the row's index in ``step``'s row order), ``target_offset`` (its
  offset in that row's ``tokens``), ``target_pos`` (the packed token whose logits predict it),
  ``target_ids`` (the target token), ``coefficients`` (``weight / B``: the loss contract,
  docs/format.md §6), ``advantages`` and ``old_log_probs`` (None when a row has none).

The step's loss is ``Σ_packs Σ_targets coefficients · ℓ``: the same plain sum as ``packing``'s,
so packs can be micro-batches and ranks can pack their shards (``step.shard(world_size=K)[rank]``).

**The budget.** A tree larger than ``max_tokens`` is cut between rows of the depth-first order (at
a node boundary); each new pack recomputes the prefix its first row shares with the previous
pack, counted in ``TreePack.recomputed`` and ``TreePacks.recomputed``. ``max_tokens=None`` gives
one tree. A row longer than the budget is an error (truncating it would change its ``L_i``), as
are rows of two steps and a step with no rows. Rows without a target (dummies' placeholders) are
left out (``TreePacks.left_out``): nothing they compute reaches the loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

import numpy as np

from . import _common
from .._gyre import Rows, tree_pack


@dataclass
class TreePack:
    """One packed prefix tree; per-token arrays are ``[T]``, per-target arrays ``[targets]``."""

    input_ids: np.ndarray
    position_ids: np.ndarray
    parent: np.ndarray
    subtree_end: np.ndarray
    target_row: np.ndarray
    target_offset: np.ndarray
    target_pos: np.ndarray
    target_ids: np.ndarray
    coefficients: np.ndarray
    advantages: np.ndarray
    old_log_probs: Optional[np.ndarray]
    #: The rows laid out in this pack (indices in the step's row order).
    rows: np.ndarray
    #: Tokens of this pack an earlier pack of the step computes too (the budget's cut).
    recomputed: int

    def __len__(self) -> int:
        return len(self.input_ids)

    def attention_mask(self) -> np.ndarray:
        """bool ``[T, T]``: ``[q, k]`` is True where token ``q`` may attend to ``k`` (``k`` is
        ``q`` or an ancestor of it)."""
        i = np.arange(len(self.input_ids))
        return (i[None, :] <= i[:, None]) & (i[:, None] < self.subtree_end[None, :])

    def torch_mask(self, *, dtype: Any = None, device: Any = None) -> Any:
        """The mask as a 4-D ``[1, 1, T, T]`` torch tensor for
        ``torch.nn.functional.scaled_dot_product_attention`` or a Hugging Face model's
        ``attention_mask`` (a 4-D mask is taken as given): bool (True = attend) by default, the
        ``sdpa`` implementation's form; with a float ``dtype``, additive (0 where allowed, the
        dtype's minimum elsewhere), the ``eager`` implementation's form."""
        import torch

        allowed = torch.as_tensor(self.attention_mask(), device=device)[None, None]
        if dtype is None or dtype == torch.bool:
            return allowed
        blocked = torch.full((), torch.finfo(dtype).min, dtype=dtype, device=device)
        return torch.where(allowed, torch.zeros((), dtype=dtype, device=device), blocked)

    def block_mask(self, *, device: Any = "cuda", block_size: int = 128) -> Any:
        """A FlexAttention ``BlockMask`` of the tree (``torch.nn.attention.flex_attention``),
        for ``flex_attention`` or a Hugging Face model loaded with
        ``attn_implementation="flex_attention"``: blocks no token attends across are skipped, so
        the cost follows the tree rather than ``T²``. Building one runs on any device; the fused
        kernel that skips the blocks is compiled for GPUs."""
        import torch
        from torch.nn.attention.flex_attention import create_block_mask

        end = torch.as_tensor(self.subtree_end, device=device)

        def tree(b: Any, h: Any, q: Any, k: Any) -> Any:
            return (k <= q) & (q < end[k])

        n = len(self.input_ids)
        return create_block_mask(tree, B=None, H=None, Q_LEN=n, KV_LEN=n, device=device, BLOCK_SIZE=block_size)

    def target_log_probs(self, logits: Any, *, kept: bool = False) -> Any:
        """Each target's log-prob, in fp32, from the pack's logits: ``[T, V]`` (or ``[1, T, V]``),
        or with ``kept=True`` the logits at ``target_pos`` only, in target order (a Hugging Face
        model called with ``logits_to_keep=torch.as_tensor(pack.target_pos)``, which spares the
        ``[T, V]`` logits)."""
        import torch

        logits = logits.reshape(-1, logits.shape[-1])
        ids = torch.as_tensor(self.target_ids, device=logits.device)
        if kept:
            if logits.shape[0] != len(ids):
                raise ValueError(f"kept logits have {logits.shape[0]} rows for {len(ids)} targets")
            picked = logits.float()
        else:
            picked = logits.index_select(0, torch.as_tensor(self.target_pos, device=logits.device)).float()
        return torch.log_softmax(picked, dim=-1).gather(-1, ids[:, None])[:, 0]


class TreePacks(List[TreePack]):
    """The packs of one step, with what they cost."""

    #: Σ tokens of the rows with targets: what flat rows compute.
    row_tokens: int
    #: Tokens of those rows' whole prefix tree (no budget).
    tree_tokens: int
    #: Rows left out for want of a target (indices in the step's row order).
    left_out: np.ndarray

    @property
    def packed_tokens(self) -> int:
        """Σ tokens of the packs: ``tree_tokens`` plus ``recomputed``."""
        return sum(len(p) for p in self)

    @property
    def recomputed(self) -> int:
        """Tokens computed again because the budget cut the tree."""
        return sum(p.recomputed for p in self)

    @property
    def token_ratio(self) -> float:
        """``row_tokens / packed_tokens``: how many times fewer tokens the packs compute than flat
        rows (the rows' prefix repeat, less what the budget recomputes)."""
        return self.row_tokens / self.packed_tokens if self.packed_tokens else 1.0


def adapt(rows: Any, *, max_tokens: Optional[int] = None) -> TreePacks:
    """``rows`` (one step, one rank's shard of it, or a list of one step's shards) as tree packs of
    at most ``max_tokens`` tokens each (None: one tree); see the module docstring."""
    views = _views(rows)
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer))):
        raise TypeError(f"max_tokens must be an int or None, not {max_tokens!r}")
    out = tree_pack(views, max_tokens=None if max_tokens is None else int(max_tokens))
    packs = TreePacks(TreePack(**p) for p in out["packs"])
    packs.row_tokens = int(out["row_tokens"])
    packs.tree_tokens = int(out["tree_tokens"])
    packs.left_out = out["left_out"]
    return packs


def _views(rows: Any) -> List[Rows]:
    if isinstance(rows, Rows):
        return [rows]
    if isinstance(rows, (list, tuple)) and all(isinstance(r, Rows) for r in rows):
        if not rows:
            raise ValueError("an empty step: no rows to pack")
        return list(rows)
    raise TypeError(
        "tree packs are built from gyre Rows (a step: rows.steps(executions=N)[k], or a shard of "
        f"one), not {type(rows).__name__}"
    )


_common.callable_module(__name__)
