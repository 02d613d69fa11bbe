"""gyre.ray on a two-node Ray cluster on this machine (`ray.cluster_utils.Cluster`: two raylets,
each with a custom resource naming it). 16 rollout workers, 8 per node, each write their own
recording on their node's disk; `OnNode` inputs make each node's shards read only that node's
recordings, the driver none, and the rows equal one `gyre admit` over all 16 files."""

import os
import random
import sys

import pytest
import ray  # the suite fails, not skips, without Ray

import gyre
import gyre.ray
from conftest import cli_rows
from test_ray import DriverReadsNothing, process_start

NODES = ("node-a", "node-b")
WORKERS = 16


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(
        initialize_head=True,
        head_node_args=dict(num_cpus=1, resources={NODES[0]: WORKERS}, include_dashboard=False),
    )
    c.add_node(num_cpus=1, resources={NODES[1]: WORKERS})
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    # The workers cannot import this test module: send its classes by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield c
    ray.shutdown()
    c.shutdown()


class RolloutWorker:
    """Writes one recording on its node: its executions whole, in groups shared with the other
    workers (a GRPO group's members are spread over both nodes)."""

    def run(self, path: str, worker: int, executions: int):
        rng = random.Random(worker)
        with gyre.Recorder(path) as rec:
            for x in range(executions):
                ex = f"w{worker:02d}x{x}"
                rec.execution(ex, group=f"g{x}", t=0.0, budget_s=100.0)
                context = [rng.randrange(1, 500) for _ in range(rng.randrange(1000, 3000))]
                for turn in range(rng.randrange(1, 4)):
                    out = [rng.randrange(500, 1000) for _ in range(rng.randrange(1, 6))]
                    rec.request(ex, f"r{turn}", input=context, output=out,
                                logprobs=[-rng.random() for _ in out], t=float(turn))
                    context = context + out + [rng.randrange(1, 500)]
                if (worker + x) % 7 == 0:
                    continue  # open: excluded
                rec.closure(ex, t=50.0, artifact="patch", version=1)
                rec.assessment(ex, artifact="patch", version=1, status="valid",
                               score=round(rng.random(), 3), t=60.0)
        return path, ray.get_runtime_context().get_node_id()


def record(tmp_path, workers=WORKERS):
    """`workers` rollout workers, alternating between the nodes (placed by the node's resource),
    each writing its recording in its node's directory; returns [(path, node_id)] in worker
    order."""
    worker = ray.remote(RolloutWorker)
    jobs = []
    for w in range(workers):
        node = NODES[w % 2]
        (tmp_path / node).mkdir(exist_ok=True)
        actor = worker.options(num_cpus=0, resources={node: 1}).remote()
        jobs.append(actor.run.remote(str(tmp_path / node / f"worker-{w:02d}.jsonl"), w, 6))
    return ray.get(jobs)


@pytest.mark.parametrize("shards", [1, 2])
def test_each_node_reads_only_its_recordings(cluster, tmp_path, monkeypatch, shards):
    recordings = record(tmp_path)
    nodes = {node for _, node in recordings}
    assert len(nodes) == 2, "one node per resource"
    for path, node in recordings:
        assert f"/{NODES[0]}/" in path or f"/{NODES[1]}/" in path
    paths = [p for p, _ in recordings]
    expected = cli_rows(paths, tmp_path / "cli.jsonl")
    assert len({r["group"] for r in expected}) > 1
    executions = len(gyre.load(paths).executions)

    # The shard actors started ahead, on the nodes the recordings are on (a trainer's job start).
    gyre.ray.start(shards=shards, node_ids=sorted(nodes), wait=True)
    mark = process_start()
    guard = DriverReadsNothing(monkeypatch, paths)
    reports = []
    out = gyre.ray.write_parquet(
        [gyre.ray.OnNode(p, n) for p, n in recordings], tmp_path / "out", shards=shards, reports=reports
    )
    guard.active = False
    assert guard.opened == []
    exchanged = sum(r["driver_bytes"] for r in reports)
    assert 0 < exchanged < sum(os.path.getsize(p) for p in paths) / 10, exchanged

    import pyarrow.parquet as pq

    got = [row for p in out for row in pq.read_table(p).to_pylist()]
    key = lambda r: (r["execution"], r["draw"])  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)
    assert len(reports) == 2 * shards
    assert all(process_start(r["pid"]) < mark for r in reports)
    assert sum(r["executions"] for r in reports) == executions
    for r in reports:
        own = {p for p, n in recordings if n == r["node_id"]}
        assert len(own) == WORKERS // 2
        # Only its node's files, and (one shard per node) each of them whole, once.
        assert set(r["files_read"]) == own, (r["node_id"], sorted(r["files_read"]))
        if shards == 1:
            assert r["files_read"] == {p: os.path.getsize(p) for p in own}
    # In order, the rows are gyre admit's.
    table = gyre.ray.admit([gyre.ray.OnNode(p, n) for p, n in recordings], shards=shards, order="input")
    assert table.to_pylist() == expected


def test_an_execution_on_two_nodes_is_refused(cluster, tmp_path):
    (a, node_a), (b, node_b) = record(tmp_path, workers=2)
    assert node_a != node_b
    # Worker 1's file holds a request of one of worker 0's (open) executions.
    with open(b, "a") as f:
        f.write('{"kind":"request","execution":"w00x0","id":"late","input":[1],"output":[2],"logprobs":[-0.5]}\n')
    with pytest.raises(ValueError, match="more than one shard.*must lie on one node"):
        gyre.ray.admit([gyre.ray.OnNode(a, node_a), gyre.ray.OnNode(b, node_b)])
    with pytest.raises(ValueError, match="OnNode"):
        gyre.ray.admit([gyre.ray.OnNode(a, node_a), b])
