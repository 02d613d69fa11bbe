"""Type stubs of gyre's native module (``gyre._gyre``): the gyre engine, wrapped."""

import os
import pathlib
from typing import (
    Any, Dict, Generic, Iterator, List, Literal, Optional, Sequence, Tuple, TypedDict, TypeVar, Union, final,
    overload,
)

import numpy as np
import numpy.typing as npt
import pyarrow
import pandas

__version__: str
SETTINGS: Tuple[Tuple[str, str, str, str], ...]
"""The admission settings (the engine's ``admit::SETTINGS``): per setting its keyword, its
Python type, its default as a Python literal and its help; ``Batch.admit`` and ``follow`` take
each as a keyword argument."""
__all__ = [
    "__version__",
    "SETTINGS",
    "LoadError",
    "Recorder",
    "Batch",
    "Rows",
    "RowIter",
    "Follower",
    "ShardSummary",
    "BatchStats",
    "load",
    "follow",
    "merge_load_errors",
    "split",
    "load_parts",
    "combine",
    "shard_of",
    "Runs",
    "index",
    "load_runs",
    "files_read",
    "tree_pack",
]

PathLike = Union[str, "os.PathLike[str]"]
TokenIds = Union[Sequence[int], npt.NDArray[np.integer[Any]]]
Floats = Union[Sequence[float], npt.NDArray[np.floating[Any]]]
Json = Any
Advantage = Literal["drgrpo", "grpo", "none"]
ClassName = Literal["main", "main-summary", "sub", "sub-summary"]

class Span(TypedDict, total=False):
    end: int
    source: Literal["system", "user", "tool", "assistant", "critique", "summary", "template", "context"]
    call_id: str

class ToolCall(TypedDict, total=False):
    id: str
    name: str
    start: int
    end: int

class Target(TypedDict):
    request: str
    offset: int
    len: int
    pos: int
    # meta.sampling.temperature of ``request``; None when it recorded none.
    temperature: Optional[float]

# One admitted trajectory (``gyre/admitted-1``), its arrays as lists (``numpy=False``, the
# default). ``advantage`` is absent with ``advantage="none"``.
Row = TypedDict(
    "Row",
    {
        "execution": str,
        "group": Json,
        "draw": int,
        "leaf": Optional[str],
        "class": Optional[ClassName],
        "reward": float,
        "advantage": Optional[float],
        "dummy": bool,
        "tokens": List[int],
        "prompt_len": int,
        "loss_mask": List[int],
        "logprobs": Optional[List[float]],
        "temperature": Optional[float],
        "targets": List[Target],
        "exec_targets": int,
        "weight": float,
        "batch_executions": int,
    },
    total=False,
)

# The same row with ``numpy=True``: ``tokens`` uint32, ``loss_mask`` uint8 and ``logprobs``
# float64 NumPy arrays.
NumpyRow = TypedDict(
    "NumpyRow",
    {
        "execution": str,
        "group": Json,
        "draw": int,
        "leaf": Optional[str],
        "class": Optional[ClassName],
        "reward": float,
        "advantage": Optional[float],
        "dummy": bool,
        "tokens": npt.NDArray[np.uint32],
        "prompt_len": int,
        "loss_mask": npt.NDArray[np.uint8],
        "logprobs": Optional[npt.NDArray[np.float64]],
        "temperature": Optional[float],
        "targets": List[Target],
        "exec_targets": int,
        "weight": float,
        "batch_executions": int,
    },
    total=False,
)

# What a RowIter yields: Row, or NumpyRow from ``iter(numpy=True)``.
RowT = TypeVar("RowT")

class Diagnostic(TypedDict):
    file: str
    line: int
    message: str
    field: Optional[str]

class LoadError(ValueError):
    """Invalid input: every problem as ``file:line: message (field)``. Picklable (message and
    ``diagnostics`` kept). A missing input raises ``FileNotFoundError`` instead."""

    diagnostics: List[Diagnostic]

@final
class Recorder:
    """Writes a gyre/1 recording as a run happens, checked as the loader checks it, in delta
    form where a request continues an earlier one. A context manager."""

    def __new__(
        cls,
        path: PathLike,
        *,
        append: bool = False,
        overwrite: bool = False,
        delta: bool = True,
        tokenizer: Json = None,
        meta: Optional[Dict[str, Json]] = None,
    ) -> "Recorder": ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def lines(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def execution(
        self,
        execution: Union[str, int],
        *,
        t: float,
        budget_s: Optional[float] = None,
        group: Json = None,
        task: Json = None,
        meta: Optional[Dict[str, Json]] = None,
    ) -> None: ...
    def request(
        self,
        execution: Union[str, int],
        id: Union[str, int],
        *,
        input: TokenIds,
        output: TokenIds,
        logprobs: Optional[Floats] = None,
        t: Optional[float] = None,
        agent: str = "main",
        purpose: Literal["task", "summary"] = "task",
        actor: Literal["policy", "evaluator"] = "policy",
        spans: Optional[Sequence[Union[Span, Tuple[int, str], Tuple[int, str, str]]]] = None,
        tool_calls: Optional[Sequence[ToolCall]] = None,
        extends: Union[str, int, None] = None,
        finish: Optional[str] = None,
        model: Optional[str] = None,
        meta: Optional[Dict[str, Json]] = None,
        not_trainable: Optional[str] = None,
    ) -> Optional[str]:
        """Returns the id of the request this one was written as a delta of, or None."""
    def closure(
        self,
        execution: Union[str, int],
        *,
        t: float,
        status: Literal["completed", "timeout", "error"] = "completed",
        artifact: Json = None,
        version: Json = None,
        committed: Union[str, int, None] = None,
        meta: Optional[Dict[str, Json]] = None,
    ) -> None: ...
    def assessment(
        self,
        execution: Union[str, int],
        *,
        artifact: Json,
        version: Json,
        status: Literal["valid", "failed"],
        t: float,
        score: Optional[float] = None,
        branch: Union[str, int, None] = None,
        attempt: Json = None,
        evaluator: Json = None,
        error: Json = None,
        critique: Json = None,
    ) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Recorder": ...
    def __exit__(self, *_args: Any) -> bool: ...

@final
class Batch:
    """Loaded recordings, ready to admit."""

    def admit(
        self,
        *,
        advantage: Advantage = "drgrpo",
        stats: Optional["BatchStats"] = None,
        # admission settings: generated from gyre.SETTINGS (GYRE_WRITE_STUB=1 pytest python/tests/test_stubs.py)
        seed: int = 0,
        jmax: int = 5,
        priority: Union[None, str, Sequence[ClassName]] = "main,main-summary,sub,sub-summary",
        # end of admission settings
    ) -> "Rows":
        """Scores and admits every execution (docs/format.md §4-§6)."""
    def summary(self) -> "ShardSummary": ...
    @property
    def executions(self) -> List[str]: ...
    @property
    def files(self) -> List[str]: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def skipped_lines(self) -> int: ...
    @property
    def dropped_executions(self) -> List[str]: ...
    def __len__(self) -> int: ...

@final
class Rows:
    """The admitted rows, in execution order then draw order."""

    def __len__(self) -> int: ...
    def __getitem__(self, i: int, /) -> Row: ...
    def __iter__(self) -> "RowIter[Row]": ...
    @overload
    def row(self, i: int, *, numpy: Literal[False] = False) -> Row: ...
    @overload
    def row(self, i: int, *, numpy: Literal[True]) -> NumpyRow: ...
    @overload
    def row(self, i: int, *, numpy: bool) -> Union[Row, NumpyRow]: ...
    @overload
    def iter(self, *, numpy: Literal[False] = False) -> "RowIter[Row]": ...
    @overload
    def iter(self, *, numpy: Literal[True]) -> "RowIter[NumpyRow]": ...
    @overload
    def iter(self, *, numpy: bool) -> "RowIter[Union[Row, NumpyRow]]": ...
    def to_arrow(self) -> pyarrow.Table: ...
    def to_pandas(self) -> pandas.DataFrame: ...
    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...
    def write(self, path: PathLike, *, force: bool = False) -> int: ...
    @property
    def batch_executions(self) -> int:
        """``B`` of these rows' loss: the batch's, or the step's (also for its shards)."""
    @property
    def is_batch(self) -> bool: ...
    @property
    def execution_ids(self) -> List[str]: ...
    @property
    def tokens(self) -> int: ...
    @property
    def targets(self) -> int: ...
    @property
    def step_rows(self) -> int: ...
    @property
    def step_targets(self) -> int: ...
    def coefficients(self) -> List[npt.NDArray[np.float64]]:
        """Per row, over ``tokens[prompt_len:]``: ``loss_mask * weight / B``."""
    def steps(self, *, executions: int) -> List["Rows"]:
        """Optimizer steps of ``executions`` whole executions each, each with its own ``B``."""
    def shard(self, *, world_size: int) -> List["Rows"]:
        """Whole executions per data-parallel rank, balanced by tokens, ``B`` these rows'."""
    @property
    def settings(self) -> Dict[str, Any]: ...
    def executions(self) -> List[Dict[str, Any]]: ...
    def execution(self, execution: str) -> Dict[str, Any]: ...
    def draw_log(self, execution: str) -> str: ...
    def why(self, execution: str, request: str, *, seeds: Optional[int] = None) -> Dict[str, Any]: ...

@final
class RowIter(Iterator[RowT], Generic[RowT]):
    def __iter__(self) -> "RowIter[RowT]": ...
    def __next__(self) -> RowT: ...

@final
class Follower(Iterator[Rows]):
    """A recording followed as it is written: its admitted rows one step of whole groups at a
    time (``gyre.follow``)."""

    def __iter__(self) -> "Follower": ...
    def __next__(self) -> Rows:
        """Waits for the next step; ``StopIteration`` after ``timeout_s`` without one, after
        ``stop()`` or after ``finish()``."""
    def poll(self) -> Optional[Rows]:
        """Reads what was appended; the next step if one is ready, else None (never waits)."""
    def finish(self) -> List[Rows]:
        """Reads the rest and returns every execution not handed out yet, in steps of whole
        groups, settled as the whole file settles them."""
    def stop(self) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def lines(self) -> int: ...
    @property
    def pending(self) -> int: ...
    @property
    def clock(self) -> Optional[float]: ...
    @property
    def late(self) -> List[str]:
        """Lines that arrived for executions already handed out and would score them
        differently (``file:line: message``); each also raises a ``UserWarning``."""
    @property
    def late_lines(self) -> int: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def open(self) -> List[str]: ...
    @property
    def incomplete_groups(self) -> List[str]: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def finished(self) -> bool: ...

@final
class ShardSummary:
    """What one shard contributes to ``B`` and group statistics. Picklable."""

    def __init__(self) -> None: ...
    @property
    def executions(self) -> List[Dict[str, Any]]: ...
    def __len__(self) -> int: ...

@final
class Runs:
    """One shard's runs of one recording (``gyre.index``): byte ranges, not bytes. Picklable."""

    def __init__(self) -> None: ...
    @property
    def bytes(self) -> int: ...
    @property
    def lines(self) -> int: ...
    def __len__(self) -> int: ...

@final
class BatchStats:
    """``B`` and group statistics of a whole batch. Picklable."""

    def __init__(self) -> None: ...
    @property
    def batch_executions(self) -> int: ...
    @property
    def groups(self) -> Dict[str, Tuple[float, float]]:
        """Per group, keyed by its JSON text (``'"g1"'``): (mean, std) of its rewards."""
    @property
    def order(self) -> List[str]: ...

def load(paths: Union[PathLike, Sequence[PathLike]], *, lenient: bool = False) -> Batch:
    """Raises ``FileNotFoundError`` for a missing input, ``LoadError`` for an invalid one."""
def follow(
    path: PathLike,
    *,
    executions: int,
    group_size: int,
    advantage: Advantage = "drgrpo",
    grace_s: float = 0.0,
    poll_s: float = 0.5,
    timeout_s: Optional[float] = 600.0,
    # admission settings: generated from gyre.SETTINGS (GYRE_WRITE_STUB=1 pytest python/tests/test_stubs.py)
    seed: int = 0,
    jmax: int = 5,
    priority: Union[None, str, Sequence[ClassName]] = "main,main-summary,sub,sub-summary",
    # end of admission settings
) -> Follower:
    """Follows a recording as it is written; yields ``Rows`` of ``executions`` executions
    (``executions // group_size`` whole, settled groups), each equal to ``gyre admit`` over
    exactly those executions' lines."""
def load_parts(parts: Sequence[Tuple[str, bytes]], *, lenient: bool = False) -> Batch: ...
def split(source: Union[PathLike, bytes], shards: int) -> List[bytes]: ...
def combine(summaries: Sequence[ShardSummary]) -> BatchStats: ...
def shard_of(execution: str, shards: int) -> int: ...
def index(source: Union[PathLike, bytes], shards: int) -> List[Runs]: ...
def load_runs(
    parts: Sequence[Tuple[str, Union[PathLike, bytes], Optional[Runs]]], *, lenient: bool = False
) -> Batch: ...
def files_read() -> Dict[str, int]: ...
def merge_load_errors(files: Sequence[str], errors: Sequence[LoadError]) -> LoadError: ...
def tree_pack(views: Sequence[Rows], *, max_tokens: Optional[int]) -> Dict[str, Any]:
    """One step's rows laid out as prefix trees (``gyre.trainers.tree`` shapes the result)."""
