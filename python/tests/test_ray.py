"""gyre.ray on a local Ray (2 CPUs) over multi-file recordings: the rows are exactly the rows
one `gyre admit` over all the files writes, for executions and groups spread over files and
shards; errors name file:line as one load would; the driver reads no recording and puts none
in the object store; gyre.ray.follow admits a growing recording next to where it is written."""

import random
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import ray  # the suite fails, not skips, without Ray

import gyre
import gyre.ray
from conftest import DEMO, REPO, cli_rows


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def chunks(path, n, out_dir):
    """Cuts a recording into `n` files of consecutive lines: executions straddle files."""
    lines = path.read_text().splitlines(keepends=True)
    size = -(-len(lines) // n)
    files = []
    for k in range(n):
        f = out_dir / f"{path.stem}-{k}.jsonl"
        f.write_text("".join(lines[k * size:(k + 1) * size]))
        files.append(f)
    return files


def rollout_workers(out_dir, workers=3, executions=18, seed=0, tokens=30):
    """Rollout workers, one recording each: GRPO groups of 3 land on different workers, and
    some executions are closed and assessed by a restarted worker, in a file of its own."""
    rng = random.Random(seed)
    recs = [gyre.Recorder(out_dir / f"worker-{w}.jsonl") for w in range(workers)]
    late = gyre.Recorder(out_dir / "worker-restarted.jsonl")
    for x in range(executions):
        rec = recs[x % workers]
        ex = f"x{x:02d}"
        rec.execution(ex, group=f"g{x // 3}", t=0.0, budget_s=100.0)
        context = [rng.randrange(1, 500) for _ in range(rng.randrange(3, tokens))]
        for turn in range(rng.randrange(1, 5)):
            out = [rng.randrange(500, 1000) for _ in range(rng.randrange(1, 9))]
            agent = "main" if rng.random() < 0.8 else "sub-1"
            rec.request(ex, f"r{turn}", input=context, output=out,
                        logprobs=[-rng.random() for _ in out], agent=agent, t=float(turn))
            if rng.random() < 0.3:  # a retry on the same context
                rec.request(ex, f"r{turn}b", input=context, output=out[:1], logprobs=[-0.5], t=float(turn))
            context = context + out + [rng.randrange(1, 500) for _ in range(rng.randrange(1, 6))]
        closer = late if x % 5 == 0 else rec
        fate = x % 6
        if fate == 0:
            continue  # open: excluded
        if fate == 1:
            closer.closure(ex, t=50.0)  # no artifact: dummy
            continue
        closer.closure(ex, t=50.0, artifact="patch", version=1)
        if fate == 2:
            closer.assessment(ex, artifact="patch", version=1, status="failed", t=60.0, error="tests")
        closer.assessment(ex, artifact="patch", version=1, status="valid",
                          score=round(rng.random(), 3) if fate != 3 else 0.0, t=70.0)
    for r in recs + [late]:
        r.close()
    return [out_dir / f"worker-{w}.jsonl" for w in range(workers)] + [out_dir / "worker-restarted.jsonl"]


def key(row):
    return row["execution"], row["draw"]


@pytest.mark.parametrize("shards", [1, 3, 7])
def test_sharded_admission_equals_one_gyre_admit(tmp_path, synth, shards):
    files = chunks(synth, 3, tmp_path) + [DEMO]
    for options, kwargs in [
        ([], {}),
        (["--seed", "9", "--jmax", "2", "--advantage", "grpo"], dict(seed=9, jmax=2, advantage="grpo")),
    ]:
        expected = cli_rows(files, tmp_path / "cli.jsonl", *options, "--force")
        table = gyre.ray.admit([str(f) for f in files], shards=shards, order="input", **kwargs)
        assert table.to_pylist() == expected
        by_shard = gyre.ray.admit(files, shards=shards, **kwargs).to_pylist()
        assert sorted(by_shard, key=key) == sorted(expected, key=key)
        # Shard order: each shard's executions together, in input order within the shard.
        shard_of = [gyre.shard_of(r["execution"], shards) for r in by_shard]
        assert shard_of == sorted(shard_of)


def test_rollout_workers_groups_across_files(tmp_path):
    files = rollout_workers(tmp_path)
    expected = cli_rows(files, tmp_path / "cli.jsonl")
    assert {r["group"] for r in expected} >= {"g0", "g1", "g2"}
    assert any(r["dummy"] for r in expected)
    table = gyre.ray.admit(files, shards=4, order="input")
    assert table.to_pylist() == expected
    # In-memory recordings (a worker's bytes, or an ObjectRef to them) work like files.
    sources = [(str(f), f.read_bytes()) for f in files[:2]] + [(str(f), ray.put(f.read_bytes())) for f in files[2:]]
    assert gyre.ray.admit(sources, shards=3, order="input").to_pylist() == expected


def test_parquet_parts_from_the_tasks(tmp_path, synth):
    files = chunks(synth, 2, tmp_path)
    expected = cli_rows(files, tmp_path / "cli.jsonl", "--jmax", "3")
    parts = gyre.ray.write_parquet(files, tmp_path / "out", shards=3, jmax=3)
    assert [p.rsplit("/", 1)[1] for p in parts] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    got = [row for p in parts for row in pq.read_table(p).to_pylist()]
    assert sorted(got, key=key) == sorted(expected, key=key)
    assert pq.read_table(tmp_path / "out").num_rows == len(expected)
    with pytest.raises(Exception, match="exists"):
        gyre.ray.write_parquet(files, tmp_path / "out", shards=3, jmax=3)
    gyre.ray.write_parquet(files, tmp_path / "out", shards=3, jmax=3, force=True)


def test_errors_name_file_and_line_across_shards(tmp_path, synth):
    files = chunks(synth, 2, tmp_path)
    lines = files[1].read_text().splitlines(keepends=True)
    lines[2] = '{"kind":"request","execution":"e0001","id":"zz","input":[1],"output":[2],"logprobs":[]}\n'
    lines[4] = "{not json\n"
    files[1].write_text("".join(lines))
    with pytest.raises(gyre.LoadError) as e:
        gyre.ray.admit(files, shards=3)
    message = str(e.value)
    assert f"{files[1]}:3: logprobs has 0 entries but output has 1 token (logprobs)" in message
    assert f"{files[1]}:5: malformed JSON" in message
    assert message.endswith("2 problems in the input")
    with pytest.warns(UserWarning, match=r"skipped"):
        table = gyre.ray.admit(files, shards=3, lenient=True, order="input")
    assert table.to_pylist() == cli_rows(files, tmp_path / "cli.jsonl", "--lenient")
    with pytest.raises(ValueError, match="advantage"):
        gyre.ray.admit(files, advantage="ppo")
    with pytest.raises(ValueError, match="shards"):
        gyre.ray.admit(files, shards=0)
    # One part per shard: a count no cluster has would exhaust memory instead of splitting.
    with pytest.raises(ValueError, match=r"shards must be an integer in 1\.\.=65536"):
        gyre.ray.admit(files, shards=2**31)
    with pytest.raises(ValueError, match="shards"):
        gyre.split(files[0], 2**31)


class DriverReadsNothing:
    """Fails any read of `paths` by this (the driver's) process: gyre's readers refuse, and an
    audit hook records every open of them."""

    def __init__(self, monkeypatch, paths):
        self.paths = {str(p) for p in paths}
        self.opened = []
        sys.addaudithook(self.hook)
        for name in ("load", "index", "load_runs", "split"):
            def refuse(*a, _name=name, **k):
                raise AssertionError(f"the driver called gyre.{_name}")
            monkeypatch.setattr(gyre, name, refuse)
        self.active = True

    def hook(self, event, args):
        if self.active and event == "open" and args and str(args[0]) in self.paths:
            self.opened.append(args[0])


def test_runs_read_in_place_equal_one_load(tmp_path, synth):
    """gyre.index + gyre.load_runs (what each actor runs): every shard reads only its runs."""
    files = chunks(synth, 3, tmp_path) + [DEMO]
    expected = cli_rows(files, tmp_path / "cli.jsonl")
    shards = 3
    index = [gyre.index(str(f), shards) for f in files]
    assert all(len(ix) == shards for ix in index)
    summaries, batches = [], []
    for k in range(shards):
        batch = gyre.load_runs([(str(f), str(f), ix[k]) for f, ix in zip(files, index)])
        summaries.append(batch.summary())
        batches.append(batch)
    stats = gyre.combine(summaries)
    rows = [r for b in batches for r in b.admit(stats=stats)]
    rank = {e: i for i, e in enumerate(stats.order)}
    assert sorted(rows, key=lambda r: (rank[r["execution"]], r["draw"])) == expected
    # The runs of each file cover it once (blank lines aside); bytes and a path agree.
    for f, ix in zip(files, index):
        assert sum(r.bytes for r in ix) <= f.stat().st_size
        assert sum(r.lines for r in ix) <= len(f.read_bytes().splitlines())
        again = gyre.index(f.read_bytes(), shards)
        assert [(r.bytes, r.lines, len(r)) for r in again] == [(r.bytes, r.lines, len(r)) for r in ix]
    read = gyre.files_read()
    assert all(read[str(f)] >= f.stat().st_size for f in files)
    # A recording with no runs for a shard is not opened; None reads it whole.
    missing = str(tmp_path / "not-here.jsonl")
    b = gyre.load_runs([(missing, missing, gyre.Runs()), (str(files[0]), str(files[0]), None)])
    assert b.files == [missing, str(files[0])]
    import pickle

    assert pickle.loads(pickle.dumps(index[0][1])).bytes == index[0][1].bytes


@pytest.mark.parametrize("shards", [1, 2])
def test_the_driver_reads_no_recording(tmp_path, monkeypatch, shards):
    files = rollout_workers(tmp_path, workers=4, executions=24, tokens=3000)
    expected = cli_rows(files, tmp_path / "cli.jsonl")
    size = sum(f.stat().st_size for f in files)
    executions = len(gyre.load(files).executions)
    guard = DriverReadsNothing(monkeypatch, files)
    reports = []
    parts = gyre.ray.write_parquet([str(f) for f in files], tmp_path / "out", shards=shards, reports=reports)
    guard.active = False
    assert guard.opened == []
    # What crossed between the driver and the shards (paths, runs, summaries, statistics) is a
    # small fraction of the recordings: none of them went through.
    exchanged = sum(r["driver_bytes"] for r in reports)
    assert 0 < exchanged < size / 20, (exchanged, size)
    got = [row for p in parts for row in pq.read_table(p).to_pylist()]
    assert sorted(got, key=key) == sorted(expected, key=key)
    # One shard reads each file whole, once; two read their runs after one of them indexed it.
    assert len(reports) == shards and len({r["pid"] for r in reports}) == shards
    for f in files:
        read = [r["files_read"].get(str(f), 0) for r in reports]
        if shards == 1:
            assert read == [f.stat().st_size]
        else:
            assert f.stat().st_size <= sum(read) <= 2 * f.stat().st_size + 2 * 65536
    assert sum(r["executions"] for r in reports) == executions
    assert all(r["peak_rss"] > 0 for r in reports)


def process_start(pid=None):
    """When a process of this machine started, in clock ticks since boot; without `pid`, a
    process started now (a mark to compare others with)."""
    if pid is not None:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    marker = subprocess.Popen(["sleep", "10"])
    try:
        return process_start(marker.pid)
    finally:
        marker.kill()
        marker.wait()


def test_started_actors_serve_the_first_call(tmp_path, synth):
    """gyre.ray.start at job start: the first admission runs on the processes it started."""
    files = chunks(synth, 2, tmp_path)
    expected = cli_rows(files, tmp_path / "cli.jsonl")
    gyre.ray.release()
    gyre.ray.start(shards=2, wait=True)
    mark = process_start()
    reports = []
    assert gyre.ray.admit(files, shards=2, order="input", reports=reports).to_pylist() == expected
    assert len({r["pid"] for r in reports}) == 2
    assert all(process_start(r["pid"]) < mark for r in reports)
    # Started again: the idle actors are kept, none is added.
    gyre.ray.start(shards=2)
    reports_again = []
    gyre.ray.admit(files, shards=2, reports=reports_again)
    assert {r["pid"] for r in reports_again} == {r["pid"] for r in reports}
    # Started without waiting for another shape (four shards, half a CPU each): an admission
    # with two ends them first, else its two one-CPU actors could not be placed.
    gyre.ray.start(shards=4)
    assert gyre.ray.admit(files, shards=2, order="input").to_pylist() == expected
    with pytest.raises(ValueError, match="shards"):
        gyre.ray.start(shards=0)
    with pytest.raises(ValueError, match="node_ids"):
        gyre.ray.start(node_ids=[])


def test_bytes_and_object_refs_are_indexed_too(tmp_path):
    files = rollout_workers(tmp_path)
    expected = cli_rows(files, tmp_path / "cli.jsonl")
    sources = [(str(f), ray.put(f.read_bytes())) for f in files]
    reports = []
    assert gyre.ray.admit(sources, shards=2, order="input", reports=reports).to_pylist() == expected
    assert all(r["files_read"] == {} for r in reports)


def test_follow_next_to_the_recording(synth):
    """gyre.ray.follow: the steps an actor admits where the recording is written equal
    gyre.follow's in this process."""
    path = synth

    def steps(follower, table):
        ready = []
        while (step := follower.poll()) is not None:
            ready.append(table(step).to_pylist())
        return ready, [table(step).to_pylist() for step in follower.finish()]

    follower = gyre.follow(path, executions=4, group_size=4, timeout_s=0)
    local = steps(follower, lambda rows: rows.to_arrow())
    assert len(local[0] + local[1]) >= 2 and all(local[0] + local[1])
    with gyre.ray.follow(path, node_id=ray.get_runtime_context().get_node_id(), executions=4,
                         group_size=4, timeout_s=0) as remote:
        assert steps(remote, lambda table: table) == local
        state = remote.state()
    assert state["lines"] == follower.lines and state["open"] == follower.open


def test_the_docs_ray_examples_run(tmp_path, monkeypatch):
    doc = (REPO / "docs" / "python.md").read_text()
    section = doc[doc.index("## Ray (`gyre.ray`)"):]
    blocks = re.findall(r"```python ray\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    # A module name no worker can import: Ray sends the example's classes by value.
    namespace = {"__name__": "docs_python_md"}
    for block in blocks:
        exec(compile(block, "docs/python.md", "exec"), namespace)
    assert len(list((tmp_path / "rows").glob("part-*.parquet"))) == 2
