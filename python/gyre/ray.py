"""Admission of a batch larger than one machine, with Ray.

Executions are independent: only ``B`` (the number of scored and dummy executions) and group
advantages depend on other executions. ``gyre.ray`` therefore admits a batch spread over many
recordings (one per rollout worker, say) with one Ray actor per shard, each loading its share
once, where the recordings lie:

1. **index**: where a group of recordings is shared by several shards, each recording is
   indexed by one of those shards (``gyre.index``): per shard, the runs of lines of its
   executions (``gyre.shard_of``: FNV-1a of the id, modulo the shards), as byte ranges with
   their line numbers, never the bytes. A recording a single shard reads whole is not indexed.
2. **load and summarize**: each shard reads its runs of every recording in place
   (``gyre.load_runs``: a plain file is read with seeks, a compressed one decompressed once
   with the rest discarded), keeps the loaded batch, and scores each execution; the driver
   combines the small summaries into the batch's ``B`` and per-group mean and standard
   deviation (``gyre.combine``), summed in the order one load of all inputs would use, so every
   value is bit for bit the single-machine value. Group members need not share a shard.
3. **admit**: each shard admits the batch it kept with those statistics
   (``Batch.admit(stats=...)``), returning an Arrow table or writing a Parquet part.

The rows are exactly the rows ``gyre admit`` over all inputs (in the order given) writes:
same values, field for field. Their order is by shard (shard 0's executions first; within a
shard, executions in input order, then draws in order); ``order="input"`` restores the order
``gyre admit`` writes.

Inputs are paths, bytes of recordings, ``ray.ObjectRef``\\ s of such bytes (a rollout worker
that kept its recording in memory), or ``OnNode(path, node_id)``: a recording on one node's
local disk, read only by shards placed on that node. ``(name, source)`` pairs name an input in
error messages. The driver never reads a path: the shards do. Each shard reserves one CPU
(``num_cpus``; a share of one where there are more shards than CPUs, since every shard must be
up at once) while it lives; its peak memory is its share of the loaded batch plus its rows.
Shard actors are kept between calls (a trainer admits every step; a fresh actor is a fresh
process to start) and end with ``release()`` or the Ray job; ``start()`` starts them ahead of
the first call (at job start, so their processes start while the first rollouts run).
"""

from __future__ import annotations

import os
import resource
import sys
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

import gyre
from gyre import _gyre

if TYPE_CHECKING:
    import pyarrow

Source = Union[str, "os.PathLike[str]", bytes, Any]
"""A recording: a path, its bytes, a ``ray.ObjectRef`` to its bytes, or an ``OnNode``."""

_WARNINGS_SHOWN = 10


@dataclass(frozen=True)
class OnNode:
    """A recording on the local disk of the Ray node ``node_id`` (a rollout worker's own file):
    only shards placed on that node read it. A rollout worker knows its node as
    ``ray.get_runtime_context().get_node_id()``."""

    path: Union[str, "os.PathLike[str]"]
    node_id: str


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the message is the point
        raise ImportError("gyre.ray needs Ray: pip install 'gyre[ray]' (or ray)") from e
    if not ray.is_initialized():
        ray.init()
    return ray


def _named(inputs) -> List[Tuple[str, Any, Optional[str]]]:
    """``(name, source, node_id)`` per input; a path source is kept as a string."""
    if isinstance(inputs, (str, bytes, os.PathLike, OnNode)):
        inputs = [inputs]
    named = []
    for i, item in enumerate(inputs):
        if isinstance(item, tuple):
            if len(item) != 2 or not isinstance(item[0], str):
                raise ValueError(f"inputs[{i}] must be a source or a (name, source) pair")
            name, source = item
        elif isinstance(item, (str, os.PathLike)):
            name, source = os.fspath(item), item
        elif isinstance(item, OnNode):
            name, source = os.fspath(item.path), item
        else:
            name, source = f"inputs[{i}]", item
        node = None
        if isinstance(source, OnNode):
            node, source = source.node_id, source.path
        if isinstance(source, (str, os.PathLike)):
            # Actors do not share the driver's working directory.
            source = os.path.abspath(os.fspath(source))
        named.append((name, source, node))
    if not named:
        raise ValueError("no inputs")
    return named


def _resolve(source):
    """A source as ``gyre.index`` and ``gyre.load_runs`` take it: a path, or bytes."""
    if isinstance(source, (str, bytes)):
        return source
    import ray

    return ray.get(source)


def _peak_rss() -> int:
    """This process's peak resident memory, bytes: Linux's VmHWM (ru_maxrss survives exec, so
    a worker would report its parent's peak), elsewhere ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


class _Shard:
    """One shard: indexes the recordings it is given, loads its runs of every recording once,
    and keeps the batch for the admission round."""

    def __init__(self) -> None:
        self.batch: Any = None
        # What this process had read before the current call (an actor serves many calls).
        self.read_before: Dict[str, int] = {}

    def ready(self) -> None:
        """Returns once the actor's process is up (the driver hands index work to the first)."""

    def index(self, items, shards: int):
        return [(i, gyre.index(_resolve(source), shards)) for i, source in items]

    def load(self, parts, lenient: bool):
        try:
            self.batch = gyre.load_runs(
                [(name, _resolve(source), runs) for name, source, runs in parts], lenient=lenient
            )
        except gyre.LoadError as e:
            return None, e, [], self.report(0)
        summary = self.batch.summary()
        return summary, None, self.batch.warnings, self.report(len(summary))

    def admit(self, settings: dict, stats, out: Optional[str], force: bool):
        batch, self.batch = self.batch, None
        rows = batch.admit(stats=stats, **settings)
        executions = len(rows.execution_ids)
        result = rows.write(out, force=force) if out is not None else _batches(rows.to_arrow())
        report = self.report(executions)
        self.read_before = gyre.files_read()
        return result, report

    def report(self, executions: int) -> Dict[str, Any]:
        import ray

        read = {p: n - self.read_before.get(p, 0) for p, n in gyre.files_read().items()}
        return dict(
            node_id=ray.get_runtime_context().get_node_id(),
            pid=os.getpid(),
            files_read={p: n for p, n in read.items() if n},
            peak_rss=_peak_rss(),
            executions=executions,
        )


def _batches(table: "pyarrow.Table") -> Tuple["pyarrow.Schema", List["pyarrow.RecordBatch"]]:
    """`table` as its schema and record batches (no copy), which Ray pickles with the batches'
    buffers out of band, straight into the object store. A ``pyarrow.Table`` itself goes
    through Ray's own reducer, which imports ``pyarrow.compute`` in the actor's process and
    runs a kernel on every chunk of every list and string column: the first table a fresh
    actor returned (95 MB of rows) took 0.49 s against 0.07 s the next time; as batches,
    0.06–0.10 s the first time. The rows' arrays are gyre's own, never slices, so each buffer
    travels whole and only once."""
    return table.schema, table.to_batches()


def _size(obj) -> int:
    """Bytes `obj` takes between processes: an Arrow table's buffers, a recording's bytes, a
    path's text, the pickle of anything else gyre sends (an ObjectRef is a reference: 0)."""
    if isinstance(obj, (str, bytes)):
        return len(obj)
    if isinstance(obj, (list, tuple)):
        return sum(_size(x) for x in obj)
    if isinstance(obj, dict):
        return sum(_size(k) + _size(v) for k, v in obj.items())
    if obj is None or isinstance(obj, (int, float, bool)):
        return 8
    if hasattr(obj, "schema") and hasattr(obj, "nbytes"):
        return int(obj.nbytes)
    if type(obj).__module__.startswith("ray"):
        return 0
    import pickle

    return len(pickle.dumps(obj))


# Idle shard actors, kept between calls (a trainer admits every step): per Ray session and job,
# node and CPU reservation. `release()` ends them.
_POOL: Dict[Tuple[str, Optional[str], float], List[Any]] = {}


def _session(ray) -> str:
    """The Ray session and job the driver is in. The job id alone repeats across sessions (every
    fresh `ray.init()` starts job 01000000), and an actor handle is only valid in its session."""
    context = ray.get_runtime_context()
    return f"{context.gcs_address}/{context.get_job_id()}"


def _pool_key(ray, node: Optional[str], cpus: float) -> Tuple[str, Optional[str], float]:
    return (_session(ray), node, cpus)


# The shard actor class per Ray session and job: exported to the cluster once, not per call.
_SHARD_CLASS: Dict[str, Any] = {}


def _shard_class(ray):
    session = _session(ray)
    if session not in _SHARD_CLASS:
        _SHARD_CLASS.clear()
        _SHARD_CLASS[session] = ray.remote(_Shard)
    return _SHARD_CLASS[session]


def _acquire(ray, plan) -> Tuple[List[Tuple[Any, int, int]], List[Tuple[str, Optional[str], float]]]:
    """The actors serving `plan`, shard order, as (actor, group, shard within the group), and
    their pool keys: idle ones from the pool first, new ones for the rest, all created before
    the caller waits on any (their processes start together). Idle actors of other shapes end
    first: they hold CPUs the new actors may need."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    taken: List[Any] = []
    keys = []
    for node, _, count in plan:
        key = _pool_key(ray, node, _cpus(ray, node, count))
        idle = _POOL.get(key, [])
        for _ in range(count):
            taken.append(idle.pop() if idle else None)
            keys.append(key)
    release()
    shard_class = _shard_class(ray)
    actors = []
    n = 0
    for g, (node, _, count) in enumerate(plan):
        for k in range(count):
            actor = taken[n]
            if actor is None:
                strategy = "SPREAD" if node is None else NodeAffinitySchedulingStrategy(node, soft=False)
                actor = shard_class.options(num_cpus=keys[n][2], scheduling_strategy=strategy).remote()
            actors.append((actor, g, k))
            n += 1
    return actors, keys


def start(
    shards: Optional[int] = None,
    *,
    node_ids: Optional[Sequence[str]] = None,
    wait: bool = False,
) -> None:
    """Starts the shard actors that a later ``admit`` or ``write_parquet`` with the same
    ``shards`` takes, as a trainer creates its actor pools at job start: each actor is a
    process, and starting it (about half a second on a busy node) then overlaps the rollouts
    instead of lengthening the first admission. ``node_ids``: for ``OnNode`` inputs, the
    nodes whose recordings will be admitted (``shards`` per node, default 1); without it, as
    for paths, bytes and ``ObjectRef`` inputs (``shards`` defaults to the CPUs Ray has
    available). Actors already idle for that shape are kept, and idle actors of other shapes
    end, as an admission would end them. ``wait=True`` returns once every process is up.
    ``release()`` ends them; so does the end of the Ray job."""
    ray = _ray()
    plan: List[Tuple[Optional[str], List[int], int]]
    if node_ids is None:
        count = _default_shards(ray) if shards is None else shards
        _shards_arg(count)
        plan = [(None, [], count)]
    else:
        count = 1 if shards is None else shards
        _shards_arg(count)
        plan = [(node, [], count) for node in dict.fromkeys(node_ids)]
        if not plan:
            raise ValueError("node_ids is empty")
    actors, keys = _acquire(ray, plan)
    for (actor, _, _), key in zip(actors, keys):
        _POOL.setdefault(key, []).append(actor)
    if wait:
        ray.get([actor.ready.remote() for actor, _, _ in actors])


def release() -> None:
    """Ends the shard actors ``gyre.ray`` keeps between calls (each holds its CPU reservation
    while it waits for the next call)."""
    import ray

    current = _session(ray) if ray.is_initialized() else None
    for key in list(_POOL):
        for actor in _POOL.pop(key):
            # Actors of an earlier session ended with it; their handles are no longer valid.
            if key[0] == current:
                ray.kill(actor)


def _default_shards(ray) -> int:
    return max(1, int(ray.available_resources().get("CPU", 1)))


def _shards_arg(shards) -> None:
    if not isinstance(shards, int) or isinstance(shards, bool) or shards < 1:
        raise ValueError(f"shards must be a positive integer, not {shards!r}")
    gyre.shard_of("", shards)  # the upper bound, as gyre.index checks it


def _plan(ray, named, shards):
    """Groups of (node_id or None, input indices, shard count), in shard order."""
    placed = [node is not None for _, _, node in named]
    if any(placed) and not all(placed):
        raise ValueError(
            "give every input as OnNode(path, node_id) or none: a shard reads node-local "
            "recordings on their node and the others from storage every node reads"
        )
    count = (1 if any(placed) else _default_shards(ray)) if shards is None else shards
    _shards_arg(count)
    if not any(placed):
        return [(None, list(range(len(named))), count)]
    nodes = {}
    for i, (_, _, node) in enumerate(named):
        nodes.setdefault(node, []).append(i)
    return [(node, files, count) for node, files in nodes.items()]


def _cpus(ray, node: Optional[str], count: int) -> float:
    """CPUs each of `count` shards reserves: one, or a share where there are fewer CPUs than
    shards (every shard must be up at once: each keeps its batch from summary to admission)."""
    if node is None:
        cpus = ray.cluster_resources().get("CPU", 1)
    else:
        cpus = next(
            (n["Resources"].get("CPU", 1) for n in ray.nodes() if n["NodeID"] == node and n["Alive"]),
            1,
        )
    return min(1.0, cpus / count)


def _index(ray, plan, actors, sources, traffic) -> Dict[int, list]:
    """Runs per shard of each recording the shards of its group share (input index → one
    ``gyre.Runs`` per shard of the group). Each such recording is indexed by one shard of its
    group, whichever is free first: the recordings go out a few at a time, and an actor whose
    process is still starting takes none until it is up, so the index pass overlaps the start
    of the slower actors instead of waiting for all of them."""
    runs: Dict[int, list] = {}
    queues: Dict[int, List[List[int]]] = {}
    for g, (_, files, count) in enumerate(plan):
        if count > 1 and files:
            size = max(1, -(-len(files) // (4 * count)))
            queues[g] = [files[j : j + size] for j in range(0, len(files), size)]
    # ObjectRef of a `ready` or `index` call → (actor position, whether it is an index call).
    pending: Dict[Any, Tuple[int, bool]] = {}
    for n, (actor, g, _) in enumerate(actors):
        if g in queues:
            pending[actor.ready.remote()] = (n, False)
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        n, indexed = pending.pop(ref)
        result = ray.get(ref)
        if indexed:
            traffic[n] += _size(result)
            runs.update(result)
        actor, g, _ = actors[n]
        if queues[g]:
            items = [(i, sources[i]) for i in queues[g].pop(0)]
            traffic[n] += _size(items)
            pending[actor.index.remote(items, plan[g][2])] = (n, True)
    return runs


def _run(
    inputs,
    *,
    shards: Optional[int],
    settings: Dict[str, Any],
    advantage: str,
    lenient: bool,
    out_dir: Optional[str],
    force: bool,
    reports: Optional[list],
):
    ray = _ray()

    named = _named(inputs)
    names = [n for n, _, _ in named]
    plan = _plan(ray, named, shards)
    settings = dict(settings, advantage=advantage)
    # Bad settings fail here, on an empty batch, before any actor starts.
    gyre.load_parts([("settings", b"")]).admit(**settings)
    actors, keys = _acquire(ray, plan)
    done = False
    try:
        # Bytes given to the driver go to the object store once, for every shard to read.
        sources = [ray.put(s) if isinstance(s, bytes) else s for _, s, _ in named]
        # Bytes the driver exchanges with each shard (arguments and results), for `reports`.
        traffic = [0] * len(actors)
        runs = _index(ray, plan, actors, sources, traffic)

        # Every shard loads every input, in order, so file indices and line numbers are those
        # of one load of all inputs; a recording outside its group is empty and never opened.
        empty = gyre.Runs()
        loads: List[Any] = []
        for actor, g, k in actors:
            _, files, count = plan[g]
            mine = set(files)
            parts: List[Tuple[str, Any, Optional[gyre.Runs]]] = []
            for i, name in enumerate(names):
                if i not in mine:
                    parts.append((name, b"", empty))
                else:
                    parts.append((name, sources[i], None if count == 1 else runs[i][k]))
            traffic[len(loads)] += _size(parts)
            loads.append(actor.load.remote(parts, lenient))
        results = ray.get(loads)
        for n, result in enumerate(results):
            traffic[n] += _size(result)
        errors = [e for _, e, _, _ in results if e is not None]
        if errors:
            raise _gyre.merge_load_errors(names, errors)
        shown = [w for _, _, ws, _ in results for w in ws]
        for w in shown[:_WARNINGS_SHOWN]:
            warnings.warn(f"gyre: {w}", stacklevel=3)
        if len(shown) > _WARNINGS_SHOWN:
            warnings.warn(f"gyre: … and {len(shown) - _WARNINGS_SHOWN} more warnings", stacklevel=3)
        try:
            stats = gyre.combine([s for s, _, _, _ in results])
        except ValueError as e:
            if plan[0][0] is not None and "more than one shard" in str(e):
                raise ValueError(
                    f"{e}; with OnNode inputs every execution's records must lie on one node "
                    "(give recordings on shared storage as paths instead)"
                ) from e
            raise

        outs: List[Optional[str]] = [None] * len(actors)
        if out_dir is not None:
            out_dir = os.path.abspath(out_dir)
            os.makedirs(out_dir, exist_ok=True)
            outs = [os.path.join(out_dir, f"part-{n:05d}.parquet") for n in range(len(actors))]
        admitted = ray.get(
            [a.admit.remote(settings, stats, outs[n], force) for n, (a, _, _) in enumerate(actors)]
        )
        if reports is not None:
            sent = _size(settings) + _size(stats) + _size(outs[0])
            for n, (loaded, done) in enumerate(zip(results, admitted)):
                reports.append(
                    dict(
                        loaded[3],
                        shard=n,
                        peak_rss=done[1]["peak_rss"],
                        driver_bytes=traffic[n] + sent + _size(done),
                    )
                )
        done = True
        return [a for a, _ in admitted], outs, stats
    finally:
        # Actors that served the call wait for the next one; after a failure they end (a
        # failed actor may be gone, a failed load may have left a batch behind).
        for (actor, _, _), key in zip(actors, keys):
            if done:
                _POOL.setdefault(key, []).append(actor)
            else:
                ray.kill(actor)


def admit(
    inputs: Sequence[Union[Source, Tuple[str, Source]]],
    *,
    shards: Optional[int] = None,
    advantage: str = "drgrpo",
    lenient: bool = False,
    order: str = "shard",
    reports: Optional[list] = None,
    **settings: Any,
) -> "pyarrow.Table":
    """Admits the batch made of ``inputs`` (read in the order given) on Ray.

    Returns the rows ``gyre admit`` writes for the same inputs and settings as one
    ``pyarrow.Table`` (the columns of ``Rows.to_arrow()``). ``shards`` defaults to the CPUs
    Ray has available; with ``OnNode`` inputs it is the shards per node (default 1: one actor
    per node, which loads with all the node's cores). ``order="shard"`` (default) keeps each
    shard's rows together, shard 0 first (with ``OnNode`` inputs a node's shards are numbered
    together, nodes in the order of their first input); ``order="input"`` sorts them into the
    order ``gyre admit`` writes (execution order, then draw order). Invalid input raises
    ``gyre.LoadError`` naming ``file:line`` of every problem, as one load of all inputs would.
    The admission settings are keywords, as for ``Batch.admit`` (``gyre.SETTINGS``: ``seed``,
    ``jmax``, ``priority``, …).

    ``reports``, when a list, receives one dict per shard (shard order): ``shard``, ``node_id``,
    ``pid`` (the actor's process), ``executions`` it loaded, ``files_read`` (bytes it read of
    each recording file in this call, ``gyre.files_read``), ``peak_rss`` (its process's peak
    resident memory so far, bytes)
    and ``driver_bytes`` (what it and the driver exchanged: arguments and results, the rows'
    Arrow record batches by their buffers; the only data that crosses the object store or the
    driver).
    """
    import pyarrow as pa

    if order not in ("shard", "input"):
        raise ValueError(f'order must be "shard" or "input", not {order!r}')
    tables, _, stats = _run(
        inputs,
        shards=shards,
        settings=settings,
        advantage=advantage,
        lenient=lenient,
        out_dir=None,
        force=False,
        reports=reports,
    )
    table = pa.concat_tables([pa.Table.from_batches(b, schema=schema) for schema, b in tables])
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
    advantage: str = "drgrpo",
    lenient: bool = False,
    force: bool = False,
    reports: Optional[list] = None,
    **settings: Any,
) -> List[str]:
    """Admits ``inputs`` on Ray and writes each shard's rows as ``out_dir/part-NNNNN.parquet``
    from the actor that admitted them (nothing passes through the driver).

    ``out_dir`` must be writable from every node (shared storage). Each part is written like
    ``gyre admit --out`` writes (atomically; an existing part is refused unless ``force``).
    Read them back as one dataset with ``pyarrow.dataset.dataset(out_dir)``,
    ``pandas.read_parquet(out_dir)`` or ``datasets.load_dataset("parquet", data_dir=out_dir)``.
    Returns the part paths, shard order. ``shards`` and ``reports`` as for ``admit``.
    """
    _, outs, _ = _run(
        inputs,
        shards=shards,
        settings=settings,
        advantage=advantage,
        lenient=lenient,
        out_dir=os.fspath(out_dir),
        force=force,
        reports=reports,
    )
    return [o for o in outs if o is not None]


class _Follow:
    """``gyre.follow`` inside an actor, next to the recording it follows."""

    def __init__(self, path: str, kwargs: dict):
        self.follower = gyre.follow(path, **kwargs)

    def next(self):
        rows = next(self.follower, None)
        return None if rows is None else rows.to_arrow()

    def poll(self):
        rows = self.follower.poll()
        return None if rows is None else rows.to_arrow()

    def finish(self):
        return [rows.to_arrow() for rows in self.follower.finish()]

    def stop(self) -> None:
        self.follower.stop()

    def state(self) -> Dict[str, Any]:
        f = self.follower
        return dict(
            open=f.open,
            incomplete_groups=f.incomplete_groups,
            late=f.late,
            late_lines=f.late_lines,
            pending=f.pending,
            lines=f.lines,
            timed_out=f.timed_out,
            files_read=gyre.files_read(),
        )


class RemoteFollower:
    """A recording followed by an actor on the node where it is written (``gyre.ray.follow``):
    each step's rows come back as a ``pyarrow.Table``; the recording stays where it is.

    Iterate for the steps (waiting as ``gyre.follow`` waits); ``poll()`` never waits;
    ``finish()`` returns the rest; ``stop()`` ends a wait; ``state()`` is the follower's
    ``open``, ``incomplete_groups``, ``late``, ``late_lines``, ``pending``, ``lines`` and
    ``timed_out``; ``close()`` (or leaving a ``with`` block) ends the actor."""

    def __init__(self, actor):
        self._actor = actor

    def __iter__(self) -> "RemoteFollower":
        return self

    def __next__(self) -> "pyarrow.Table":
        import ray

        table = ray.get(self._actor.next.remote())
        if table is None:
            raise StopIteration
        return table

    def poll(self) -> Optional["pyarrow.Table"]:
        """The next step's rows if one is ready, else None (never waits)."""
        import ray

        return ray.get(self._actor.poll.remote())

    def finish(self) -> List["pyarrow.Table"]:
        """Reads the rest; every execution not handed out yet, in steps of whole groups."""
        import ray

        return ray.get(self._actor.finish.remote())

    def stop(self) -> None:
        """Ends the current or next wait (iteration then stops)."""
        import ray

        ray.get(self._actor.stop.remote())

    def state(self) -> Dict[str, Any]:
        """The follower's counters and lists (see the class docs)."""
        import ray

        return ray.get(self._actor.state.remote())

    def close(self) -> None:
        """Ends the actor."""
        import ray

        ray.kill(self._actor)

    def __enter__(self) -> "RemoteFollower":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def follow(
    path: Union[str, "os.PathLike[str]"],
    *,
    node_id: Optional[str] = None,
    **kwargs: Any,
) -> RemoteFollower:
    """``gyre.follow(path, **kwargs)`` in a Ray actor on node ``node_id`` (the node whose
    rollout workers write ``path`` on its local disk; ``None``: any node, for a path on shared
    storage). The recording is read there, as it grows; each step's admitted rows come back as
    a ``pyarrow.Table`` (rows, not recording bytes). The actor reserves no CPU (it waits on the
    file most of the time) and serves ``stop()`` while a step is awaited."""
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = "DEFAULT" if node_id is None else NodeAffinitySchedulingStrategy(node_id, soft=False)
    actor_class = ray.remote(_Follow).options(
        num_cpus=0, max_concurrency=2, scheduling_strategy=strategy
    )
    actor = actor_class.remote(os.fspath(path), kwargs)
    # Bad settings and a missing file raise here, not at the first step.
    ray.get(actor.state.remote())
    return RemoteFollower(actor)
