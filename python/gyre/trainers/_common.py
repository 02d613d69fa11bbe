"""What every adapter shares: the rows of a step as NumPy arrays with their engine-computed
coefficients, and modules that are callable (``gyre.trainers.verl(rows)``)."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any, List, Optional

import numpy as np


@dataclass
class StepRows:
    """One step's (or one rank's) rows, as the engine gives them."""

    rows: List[dict]
    coefficients: List[np.ndarray]
    batch_executions: int
    step_rows: int
    step_targets: int


def step_rows(rows: Any, *, need_advantage: bool = True) -> StepRows:
    """Rows with NumPy arrays and their coefficients (``loss_mask * weight / B``)."""
    recs = list(rows.iter(numpy=True))
    if need_advantage and recs and "advantage" not in recs[0]:
        raise ValueError(
            'these rows have no advantage (admitted with advantage="none"): the adapters fold '
            "the coefficient into the advantage, so admit with advantage=\"drgrpo\" or \"grpo\""
        )
    return StepRows(
        rows=recs,
        coefficients=rows.coefficients(),
        batch_executions=rows.batch_executions,
        step_rows=rows.step_rows,
        step_targets=rows.step_targets,
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
