"""gyre in Python: record agentic-RL rollouts as gyre/1, admit them into training rows.

The package wraps gyre's Rust engine (the same one the ``gyre`` command line runs), so every
value is the one ``gyre admit`` writes for the same input and settings.

Record a run as it happens::

    with gyre.Recorder("run.jsonl") as rec:
        rec.execution("x1", group="g", t=0.0, budget_s=60.0)
        rec.request("x1", "r1", input=[1, 2, 3], output=[4, 5], logprobs=[-0.1, -0.2], t=1.0)
        rec.closure("x1", t=3.0, status="completed", artifact="patch", version=1)
        rec.assessment("x1", artifact="patch", version=1, status="valid", score=1.0, t=4.0)

Admit it::

    rows = gyre.load(["run.jsonl"]).admit(seed=3, jmax=2)
    for row in rows: ...              # dicts with the gyre/admitted-1 fields
    table = rows.to_arrow()           # pyarrow.Table
    rows.write("rows.parquet")        # or .jsonl, .jsonl.zst

Admit it while it is written (online RL), one step of whole groups at a time::

    for step in gyre.follow("run.jsonl", executions=64, group_size=8, seed=3):
        ...                           # a Rows, like Batch.admit's

``gyre.trainers`` turns rows into what each trainer's step consumes (``gyre.trainers.verl(step)``);
``gyre.ray`` admits a batch spread over many files on a Ray cluster with the same result.
"""

from ._gyre import (
    Batch,
    BatchStats,
    Follower,
    LoadError,
    Recorder,
    RowIter,
    Rows,
    Runs,
    SETTINGS,
    ShardSummary,
    __version__,
    combine,
    files_read,
    follow,
    index,
    load,
    load_parts,
    load_runs,
    shard_of,
    split,
)

# The adapters need NumPy alone (each trainer is imported when its adapter runs), so
# `gyre.trainers.verl(rows)` works after `import gyre` as docs/trainers.md writes it.
from . import trainers

__all__ = [
    "Batch",
    "BatchStats",
    "Follower",
    "LoadError",
    "Recorder",
    "RowIter",
    "Rows",
    "Runs",
    "SETTINGS",
    "ShardSummary",
    "__version__",
    "combine",
    "files_read",
    "follow",
    "index",
    "load",
    "load_parts",
    "load_runs",
    "shard_of",
    "split",
]
