"""gyre.follow: a recording admitted while it is written. Every step must be what `gyre admit`
(the CLI) and `gyre.load` give over a file holding exactly that step's executions' lines, for a
`Recorder` writing as a run happens and for raw lines appended in pieces that cut lines."""

import json
import random

import numpy as np
import pytest

import gyre
from conftest import cli_rows


def execution_lines(path, ids):
    """The lines of executions `ids` in `path`, in file order (the header kept)."""
    out = []
    for line in path.read_bytes().splitlines(keepends=True):
        rec = json.loads(line)
        if rec["kind"] == "header" or str(rec.get("execution")) in ids:
            out.append(line)
    return b"".join(out)


def check_step(step, path, tmp_path, k, seed, jmax):
    """`step` equals `gyre admit` and `gyre.load` over its executions' lines."""
    own = tmp_path / f"step{k}.jsonl"
    own.write_bytes(execution_lines(path, set(step.execution_ids)))
    want = cli_rows([own], tmp_path / f"step{k}.rows.jsonl", "--seed", seed, "--jmax", jmax)
    assert list(step) == want, f"step {k}"
    again = gyre.load_parts([(str(own), own.read_bytes())]).admit(seed=seed, jmax=jmax)
    assert list(step) == list(again)
    assert step.batch_executions == len([e for e in step.executions() if e["status"] != "excluded"])


def simulated_run(rng, groups, size):
    """Records of `groups` groups of `size` executions on one clock, in time order: valid
    rewards, failed-only assessments (excluded when the clock passes the budget), dummies,
    requests after closure, and one execution that never closes."""
    events = []
    for g in range(groups):
        for m in range(size):
            x = f"g{g}m{m}"
            t = g * 7.0 + m * rng.random()
            events.append((t, "execution", x, dict(group=f"g{g}", t=t, budget_s=40.0)))
            ctx = [rng.randrange(100) for _ in range(5)]
            for q in range(1 + rng.randrange(3)):
                t += 1 + rng.random()
                out = [rng.randrange(100) for _ in range(1 + rng.randrange(4))]
                events.append((t, "request", x, dict(id=f"r{q}", input=list(ctx), output=out,
                                                      logprobs=[-0.5] * len(out), t=t)))
                ctx += out + [rng.randrange(100)]
            fate = rng.randrange(6) if (g, m) != (groups - 1, size - 1) else "open"
            if fate == "open":
                continue
            t += 1
            artifact = None if fate == 0 else "patch"
            events.append((t, "closure", x, dict(t=t, artifact=artifact, version=1 if artifact else None)))
            if fate == 1:
                events.append((t + 0.5, "request", x, dict(id="late", input=[1], output=[2], logprobs=[-0.1], t=t + 0.5)))
            if artifact:
                t += 2 + rng.random() * 5
                status = "failed" if fate == 2 else "valid"
                score = None if fate == 2 else round(rng.random(), 3)
                events.append((t, "assessment", x, dict(artifact="patch", version=1, status=status, score=score, t=t)))
    events.sort(key=lambda e: e[0])
    return events


@pytest.mark.parametrize("seed", [1, 2])
def test_steps_of_a_recorder_run_are_gyre_admit_over_their_lines(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "run.jsonl"
    rec = gyre.Recorder(path)
    follower = gyre.follow(path, executions=8, group_size=4, seed=seed, jmax=2)
    steps = []
    for _, kind, x, kw in simulated_run(rng, groups=6, size=4):
        getattr(rec, kind)(x, **kw)
        rec.flush()
        step = follower.poll()
        if step is not None:
            assert len(step.execution_ids) == 8
            steps.append(step)
    rec.close()
    online = len(steps)
    assert online >= 1 and follower.pending > 0
    steps += follower.finish()
    assert follower.open == ["g5m3"] and follower.late == []
    ids = [i for s in steps for i in s.execution_ids]
    assert sorted(ids) == sorted(gyre.load(path).executions)
    for k, step in enumerate(steps):
        check_step(step, path, tmp_path, k, seed, 2)
        # A step is a batch of its own: coefficients and shards work on it.
        for r, c in zip(step.iter(numpy=True), step.coefficients()):
            np.testing.assert_array_equal(c, r["loss_mask"] * r["weight"] / step.batch_executions)
        ranks = step.shard(world_size=2)
        assert sorted(i for r in ranks for i in r.execution_ids) == sorted(
            e["execution"] for e in step.executions() if e["status"] != "excluded")


def test_raw_lines_appended_in_pieces_cutting_lines(tmp_path, synth):
    """A `gyre synth` recording appended 777 bytes at a time, the last line without its
    newline until the end: the same steps as `gyre admit` over each step's lines."""
    data = synth.read_bytes()
    path = tmp_path / "grow.jsonl"
    path.write_bytes(b"")
    follower = gyre.follow(path, executions=4, group_size=4, seed=5, jmax=0, grace_s=1e9)
    steps = []
    body, last = data[:-1], data[-1:]
    assert last == b"\n"
    with open(path, "ab") as f:
        for i in range(0, len(body), 777):
            f.write(body[i:i + 777])
            f.flush()
            while (step := follower.poll()) is not None:
                steps.append(step)
    lines_before = follower.lines
    assert lines_before == data.count(b"\n") - 1, "the unterminated last line is not read yet"
    steps += follower.finish()
    assert follower.lines == lines_before + 1
    assert steps and all(len(s.execution_ids) == 4 for s in steps)
    assert sorted(i for s in steps for i in s.execution_ids) == sorted(gyre.load(synth).executions)
    for k, step in enumerate(steps):
        check_step(step, synth, tmp_path, k, 5, 0)


def test_iteration_stops_at_the_timeout_and_finish_flushes(tmp_path):
    path = tmp_path / "run.jsonl"
    with gyre.Recorder(path) as rec:
        for x, g in [("a", "g"), ("b", "g"), ("c", "h")]:
            rec.execution(x, group=g, t=0.0, budget_s=10.0)
            rec.request(x, "r1", input=[1, 2], output=[3], logprobs=[-0.5], t=1.0)
            rec.closure(x, t=2.0, artifact="p", version=1)
            rec.assessment(x, artifact="p", version=1, status="valid", score=float(x == "a"), t=3.0)
    follower = gyre.follow(path, executions=2, group_size=2, poll_s=0.01, timeout_s=0.2)
    got = list(follower)
    assert [s.execution_ids for s in got] == [["a", "b"]]
    assert follower.timed_out and follower.pending == 1
    rest = follower.finish()
    assert [s.execution_ids for s in rest] == [["c"]]
    assert follower.incomplete_groups == ['"h"'] and follower.finished
    assert list(follower) == [] and not follower.timed_out


def test_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "run.jsonl"
    with pytest.raises(FileNotFoundError):
        gyre.follow(path, executions=4, group_size=4)
    path.write_text('{"kind":"execution","execution":"a","t":0,"group":"g"}\n')
    with pytest.raises(ValueError, match="multiple of group_size=4"):
        gyre.follow(path, executions=6, group_size=4)
    with pytest.raises(ValueError, match="poll_s"):
        gyre.follow(path, executions=4, group_size=4, poll_s=0)
    follower = gyre.follow(path, executions=4, group_size=4)
    assert follower.poll() is None
    with open(path, "a") as f:
        f.write('{"kind":"closure","execution":"a","t":1}\n')
    with pytest.raises(gyre.LoadError) as e:
        follower.poll()
    assert e.value.diagnostics[0]["line"] == 2 and e.value.diagnostics[0]["field"] == "status"

    other = tmp_path / "other.jsonl"
    other.write_text('{"kind":"execution","execution":"a","t":0,"group":"g"}\n')
    follower = gyre.follow(other, executions=4, group_size=4)
    assert follower.poll() is None
    other.write_text("")
    with pytest.raises(OSError, match="truncated to 0 bytes"):
        follower.poll()
