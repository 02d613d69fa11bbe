"""What every adapter shares: the rows of a step as NumPy arrays with their engine-computed
coefficients, and modules that are callable (``gyre.trainers.verl(rows)``)."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

#: ``split=`` values besides a prompt width (an int ≥ 1).
SPLITS = ("first_target", "min_padding")
#: ``dummy=`` values.
DUMMIES = ("short", "full")


@dataclass
class StepRows:
    """One step's (or one rank's) rows, as the engine gives them."""

    rows: List[dict]
    coefficients: List[np.ndarray]
    batch_executions: int
    step_rows: int
    step_targets: int


def step_rows(
    rows: Any,
    *,
    need_advantage: bool = True,
    split: Union[str, int] = "first_target",
    dummy: str = "short",
) -> StepRows:
    """Rows with NumPy arrays and their coefficients (``loss_mask * weight / B``), laid out by
    ``split`` and ``dummy`` (see :func:`layout`)."""
    recs = list(rows.iter(numpy=True))
    if need_advantage and recs and "advantage" not in recs[0]:
        raise ValueError(
            'these rows have no advantage (admitted with advantage="none"): the adapters fold '
            "the coefficient into the advantage, so admit with advantage=\"drgrpo\" or \"grpo\""
        )
    recs, coefficients = layout(recs, rows.coefficients(), split=split, dummy=dummy)
    return StepRows(
        rows=recs,
        coefficients=coefficients,
        batch_executions=rows.batch_executions,
        step_rows=rows.step_rows,
        step_targets=rows.step_targets,
    )


def layout(
    recs: List[dict],
    coefficients: List[np.ndarray],
    *,
    split: Union[str, int] = "first_target",
    dummy: str = "short",
) -> Tuple[List[dict], List[np.ndarray]]:
    """The rows (NumPy form) and their coefficients, re-laid for a trainer; never a target, a
    weight or a coefficient changed, only where the response starts and how long dummies are.

    ``dummy="short"`` cuts a dummy execution's placeholder row to its first two tokens (one
    prompt token, one response token, no target): it is there to be counted in ``B`` and to fill
    its group's slot, and has no gradient at any length. ``"full"`` keeps its whole path.

    ``split`` moves the prompt/response boundary of padded ``(prompt | response)`` layouts
    earlier, never later (every target stays in the response): ``"first_target"`` keeps it at the
    row's first target (``prompt_len``); an int ``P`` ≥ 1 makes every prompt at most ``P`` tokens;
    ``"min_padding"`` picks the ``P`` giving the fewest padded cells for these rows (the largest
    such ``P`` on a tie: fewer response positions to compute log-probs for). Tokens moved into the
    response get ``loss_mask`` 0, coefficient 0 and log-prob 0.0 (no target is there)."""
    if dummy not in DUMMIES:
        raise ValueError(f"dummy must be one of {', '.join(DUMMIES)}, not {dummy!r}")
    if dummy == "short":
        recs = [_short_dummy(r) if r["dummy"] and len(r["tokens"]) > 2 else r for r in recs]
        coefficients = [np.zeros(len(r["loss_mask"])) if r["dummy"] else c for r, c in zip(recs, coefficients)]
    width = prompt_width(recs, split)
    if width is None:
        return recs, coefficients
    out_recs, out_coefficients = [], []
    for r, c in zip(recs, coefficients):
        moved = int(r["prompt_len"]) - width
        if moved <= 0:
            out_recs.append(r)
            out_coefficients.append(c)
            continue
        r = dict(r, prompt_len=width, loss_mask=np.concatenate([np.zeros(moved, dtype=r["loss_mask"].dtype), r["loss_mask"]]))
        if r["logprobs"] is not None:
            r["logprobs"] = np.concatenate([np.zeros(moved), r["logprobs"]])
        out_recs.append(r)
        out_coefficients.append(np.concatenate([np.zeros(moved), c]))
    return out_recs, out_coefficients


def prompt_width(recs: Sequence[dict], split: Union[str, int]) -> Optional[int]:
    """The prompt width ``split`` asks for over ``recs`` (``None``: each row's ``prompt_len``)."""
    if isinstance(split, str):
        if split == "first_target":
            return None
        if split == "min_padding":
            return _min_padding_width(recs)
    elif isinstance(split, (int, np.integer)) and not isinstance(split, bool):
        if split >= 1:
            return int(split)
        raise ValueError(f"split must be at least 1 (a prompt needs a token to predict from), not {split}")
    raise ValueError(f"split must be one of {', '.join(SPLITS)} or a prompt width, not {split!r}")


def padded_cells(recs: Sequence[dict]) -> Tuple[int, int]:
    """``(real, padded)`` token cells of ``recs`` laid out as left-padded prompts beside
    right-padded responses (what verl, TRL and SkyRL build)."""
    if not recs:
        return 0, 0
    p = max(int(r["prompt_len"]) for r in recs)
    n = max(len(r["tokens"]) - int(r["prompt_len"]) for r in recs)
    return sum(len(r["tokens"]) for r in recs), len(recs) * (p + n)


def _min_padding_width(recs: Sequence[dict]) -> Optional[int]:
    # With a prompt width P, row k's prompt is min(p_k, P): the padded width is
    # min(P, max p) + max_k (n_k - min(p_k, P)). Between consecutive distinct p values q_j and
    # q_j+1 it is max(P + C_j, D_j), C_j the longest response of the rows with p_k <= q_j and D_j
    # the longest row of the others: never decreasing in P, flat up to D_j - C_j.
    if not recs:
        return None
    p = np.array([int(r["prompt_len"]) for r in recs], dtype=np.int64)
    n = np.array([len(r["tokens"]) for r in recs], dtype=np.int64)
    order = np.argsort(p, kind="stable")
    p, n = p[order], n[order]
    qs, first = np.unique(p, return_index=True)
    kept = np.maximum.accumulate(n - p)
    longest_after = np.maximum.accumulate(n[::-1])[::-1]
    best: Optional[Tuple[int, int]] = None
    for j, q in enumerate(qs):
        last = (first[j + 1] if j + 1 < len(qs) else len(p)) - 1
        c = int(kept[last])
        if last + 1 < len(p):
            d = int(longest_after[last + 1])
            width = max(int(q) + c, d)
            # The largest P of this interval with the same width.
            widest = int(q) if int(q) + c > d else min(d - c, int(qs[j + 1]))
        else:
            width, widest = int(q) + c, int(q)
        if best is None or width < best[0] or (width == best[0] and widest > best[1]):
            best = (width, widest)
    return None if best is None else best[1]


def _short_dummy(r: dict) -> dict:
    return dict(
        r,
        tokens=r["tokens"][:2],
        prompt_len=1,
        loss_mask=np.zeros(1, dtype=r["loss_mask"].dtype),
        logprobs=None if r["logprobs"] is None else np.zeros(1),
        targets=[],
    )


def advantage(row: dict) -> float:
    """The row's advantage; 0 for a row whose execution has none (it has no targets either)."""
    a = row.get("advantage")
    return 0.0 if a is None else float(a)


def response(row: dict) -> np.ndarray:
    return row["tokens"][row["prompt_len"] :]


def prompt(row: dict) -> np.ndarray:
    return row["tokens"][: row["prompt_len"]]


def logprobs_or_none(recs: List[dict]) -> Optional[List[np.ndarray]]:
    """Every row's behaviour log-probs, or None when a row has none (imported without them)."""
    if any(r["logprobs"] is None for r in recs):
        return None
    return [r["logprobs"] for r in recs]


def uid(row: dict) -> str:
    """The row's GRPO group as text (its execution id when it has no group)."""
    g = row["group"]
    if g is None:
        return str(row["execution"])
    return g if isinstance(g, str) else __import__("json").dumps(g, sort_keys=True)


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.adapt(*args, **kwargs)  # type: ignore[attr-defined]


def callable_module(name: str) -> None:
    """Makes module ``name`` callable as its ``adapt`` function."""
    sys.modules[name].__class__ = _CallableModule
