"""Admission of a batch larger than one machine, with Ray.

Executions are independent: only ``B`` (the number of scored and dummy executions) and group
advantages depend on other executions. ``gyre.ray`` therefore admits a batch spread over many
recordings (one per rollout worker, say) in three rounds of Ray tasks:

1. **split**, one task per input: each line goes to the shard of its execution
   (``gyre.shard_of``: FNV-1a of the id, modulo ``shards``) and is left blank in the other
   shards' parts, so line numbers survive and an execution whose records are spread over
   several files (a worker restarted, a recording appended to) finds all of them, in order.
2. **summarize**, one task per shard: load its parts, score each execution; the driver
   combines the small summaries into the batch's ``B`` and per-group mean and standard
   deviation (``gyre.combine``), summed in the order one load of all inputs would use, so every
   value is bit for bit the single-machine value. Group members need not share a shard.
3. **admit**, one task per shard: load its parts again and admit them with those statistics
   (``Batch.admit(stats=...)``), returning an Arrow table or writing a Parquet part.

The rows are exactly the rows ``gyre admit`` over all inputs (in the order given) writes:
same values, field for field. Their order is by shard (shard 0's executions first; within a
shard, executions in input order, then draws in order); ``order="input"`` restores the order
``gyre admit`` writes.

Inputs are paths readable on every node (a shared filesystem), bytes of recordings, or
``ray.ObjectRef``\\ s of such bytes (a rollout worker that kept its recording in memory);
``(name, source)`` pairs name an input in error messages. Each shard's tasks reserve one CPU
(``num_cpus``); a shard's peak memory is its share of the loaded batch plus its rows.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple, Union

import gyre
from gyre import _gyre

if TYPE_CHECKING:
    import pyarrow

Source = Union[str, "os.PathLike[str]", bytes, Any]
"""A recording: a path, its bytes, or a ``ray.ObjectRef`` to its bytes."""

_WARNINGS_SHOWN = 10


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the message is the point
        raise ImportError("gyre.ray needs Ray: pip install 'gyre[ray]' (or ray)") from e
    if not ray.is_initialized():
        ray.init()
    return ray


def _named(inputs: Sequence[Union[Source, Tuple[str, Source]]]) -> List[Tuple[str, Source]]:
    if isinstance(inputs, (str, bytes, os.PathLike)):
        inputs = [inputs]
    named = []
    for i, item in enumerate(inputs):
        if isinstance(item, tuple):
            if len(item) != 2 or not isinstance(item[0], str):
                raise ValueError(f"inputs[{i}] must be a source or a (name, source) pair")
            named.append(item)
        elif isinstance(item, (str, os.PathLike)):
            named.append((os.fspath(item), os.fspath(item)))
        else:
            named.append((f"inputs[{i}]", item))
    if not named:
        raise ValueError("no inputs")
    return named


def _split(source: Source, shards: int) -> Union[bytes, List[bytes]]:
    parts = gyre.split(source, shards)
    return parts[0] if shards == 1 else parts


def _summarize(names: List[str], lenient: bool, *parts: bytes):
    try:
        batch = gyre.load_parts(list(zip(names, parts)), lenient=lenient)
    except gyre.LoadError as e:
        return None, e, []
    return batch.summary(), None, batch.warnings


def _admit(
    names: List[str],
    lenient: bool,
    settings: dict,
    stats: "gyre.BatchStats",
    out: Optional[str],
    force: bool,
    *parts: bytes,
):
    batch = gyre.load_parts(list(zip(names, parts)), lenient=lenient)
    rows = batch.admit(stats=stats, **settings)
    if out is not None:
        return rows.write(out, force=force)
    return rows.to_arrow()


def _default_shards(ray) -> int:
    return max(1, int(ray.available_resources().get("CPU", 1)))


def _run(
    inputs,
    *,
    shards: Optional[int],
    seed: int,
    jmax: int,
    priority,
    advantage: str,
    lenient: bool,
    out_dir: Optional[str],
    force: bool,
):
    ray = _ray()
    named = _named(inputs)
    names = [n for n, _ in named]
    shards = _default_shards(ray) if shards is None else shards
    if not isinstance(shards, int) or isinstance(shards, bool) or shards < 1:
        raise ValueError(f"shards must be a positive integer, not {shards!r}")
    gyre.shard_of("", shards)  # the upper bound, as gyre.split checks it
    settings = dict(seed=seed, jmax=jmax, priority=priority, advantage=advantage)
    # Bad settings fail here, on an empty batch, before any task runs.
    gyre.load_parts([("settings", b"")]).admit(**settings)
    split = ray.remote(_split).options(num_returns=shards)
    parts = [split.remote(source, shards) for _, source in named]
    if shards == 1:
        parts = [[p] for p in parts]
    by_shard = [[parts[f][k] for f in range(len(named))] for k in range(shards)]

    summarize = ray.remote(_summarize)
    results = ray.get([summarize.remote(names, lenient, *by_shard[k]) for k in range(shards)])
    errors = [e for _, e, _ in results if e is not None]
    if errors:
        raise _gyre.merge_load_errors(names, errors)
    shown = [w for _, _, ws in results for w in ws]
    for w in shown[:_WARNINGS_SHOWN]:
        warnings.warn(f"gyre: {w}", stacklevel=3)
    if len(shown) > _WARNINGS_SHOWN:
        warnings.warn(f"gyre: … and {len(shown) - _WARNINGS_SHOWN} more warnings", stacklevel=3)
    stats = gyre.combine([s for s, _, _ in results])

    admit = ray.remote(_admit)
    outs: List[Optional[str]] = [None] * shards
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
        outs = [os.path.join(out_dir, f"part-{k:05d}.parquet") for k in range(shards)]
    refs = [
        admit.remote(names, lenient, settings, stats, outs[k], force, *by_shard[k])
        for k in range(shards)
    ]
    return ray.get(refs), outs, stats


def admit(
    inputs: Sequence[Union[Source, Tuple[str, Source]]],
    *,
    shards: Optional[int] = None,
    seed: int = 0,
    jmax: int = 5,
    priority: Union[None, str, Sequence[str]] = None,
    advantage: str = "drgrpo",
    lenient: bool = False,
    order: str = "shard",
) -> "pyarrow.Table":
    """Admits the batch made of ``inputs`` (read in the order given) on Ray.

    Returns the rows ``gyre admit`` writes for the same inputs and settings as one
    ``pyarrow.Table`` (the columns of ``Rows.to_arrow()``). ``shards`` defaults to the CPUs
    Ray has available. ``order="shard"`` (default) keeps each shard's rows together, shard 0
    first; ``order="input"`` sorts them into the order ``gyre admit`` writes (execution order,
    then draw order). Invalid input raises ``gyre.LoadError`` naming ``file:line`` of every
    problem, as one load of all inputs would.
    """
    import pyarrow as pa

    if order not in ("shard", "input"):
        raise ValueError(f'order must be "shard" or "input", not {order!r}')
    tables, _, stats = _run(
        inputs,
        shards=shards,
        seed=seed,
        jmax=jmax,
        priority=priority,
        advantage=advantage,
        lenient=lenient,
        out_dir=None,
        force=False,
    )
    table = pa.concat_tables(tables)
    if order == "input" and table.num_rows:
        import numpy as np

        rank = {e: i for i, e in enumerate(stats.order)}
        keys = np.fromiter(
            (rank[e] for e in table.column("execution").to_pylist()),
            dtype=np.int64,
            count=table.num_rows,
        )
        table = table.take(np.argsort(keys, kind="stable"))
    return table


def write_parquet(
    inputs: Sequence[Union[Source, Tuple[str, Source]]],
    out_dir: Union[str, "os.PathLike[str]"],
    *,
    shards: Optional[int] = None,
    seed: int = 0,
    jmax: int = 5,
    priority: Union[None, str, Sequence[str]] = None,
    advantage: str = "drgrpo",
    lenient: bool = False,
    force: bool = False,
) -> List[str]:
    """Admits ``inputs`` on Ray and writes each shard's rows as ``out_dir/part-NNNNN.parquet``
    from the task that admitted them (nothing passes through the driver).

    ``out_dir`` must be writable from every node (shared storage). Each part is written like
    ``gyre admit --out`` writes (atomically; an existing part is refused unless ``force``).
    Read them back as one dataset with ``pyarrow.dataset.dataset(out_dir)``,
    ``pandas.read_parquet(out_dir)`` or ``datasets.load_dataset("parquet", data_dir=out_dir)``.
    Returns the part paths, shard order.
    """
    _, outs, _ = _run(
        inputs,
        shards=shards,
        seed=seed,
        jmax=jmax,
        priority=priority,
        advantage=advantage,
        lenient=lenient,
        out_dir=os.fspath(out_dir),
        force=force,
    )
    return [o for o in outs if o is not None]
