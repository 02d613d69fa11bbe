"""gyre.Recorder: the issue's API shape, NumPy inputs, automatic delta form, validation as the
loader validates (ValueError with the reason, nothing written), files, and the CLI reading what
it wrote (`gyre validate`, `gyre admit`, `gyre inspect` in tmux)."""

import json
import subprocess
import time

import numpy as np
import pytest

import gyre
from conftest import cli_rows, gyre_bin, run_gyre


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_issue_shape_records_a_run_the_cli_admits(tmp_path):
    path = tmp_path / "run.jsonl"
    rec = gyre.Recorder(str(path))
    rec.execution("x1", group="g", t=0.0, budget_s=60.0)
    rec.request("x1", "r1", input=[1, 2, 3], output=[4, 5], logprobs=[-0.1, -0.2], t=1.0)
    rec.closure("x1", t=3.0, status="completed", artifact="patch", version=1)
    rec.assessment("x1", artifact="patch", version=1, status="valid", score=1.0, t=4.0)
    rec.close()
    rows = gyre.load([str(path)]).admit(seed=3, jmax=2)
    assert [r["leaf"] for r in rows] == ["r1"]
    assert rows.to_arrow().num_rows == 1
    recs = lines(path)
    assert [r["kind"] for r in recs] == ["header", "execution", "request", "closure", "assessment"]
    assert recs[2]["input"] == [1, 2, 3] and recs[2]["logprobs"] == [-0.1, -0.2]
    assert run_gyre("validate", path).returncode == 0
    assert list(rows) == cli_rows([path], tmp_path / "cli.jsonl", "--seed", "3", "--jmax", "2")


def test_a_not_trainable_output_is_context_and_never_a_target(tmp_path):
    path = tmp_path / "hidden.jsonl"
    with gyre.Recorder(path) as rec:
        rec.request("e", "r1", input=[1, 2], output=[3, 4], logprobs=[-0.1, -0.2],
                    not_trainable="hidden thinking: the log holds a signature, not the reasoning")
        rec.request("e", "r2", input=[1, 2, 3, 4, 5], output=[6], logprobs=[-0.3])
        rec.closure("e", t=1.0, artifact="a", version=1)
        rec.assessment("e", artifact="a", version=1, status="valid", score=1.0, t=2.0)
    recs = [r for r in lines(path) if r["kind"] == "request"]
    assert recs[0]["not_trainable"].startswith("hidden thinking")
    assert "not_trainable" not in recs[1] and recs[1]["extends"] == "r1"
    rows = gyre.load([str(path)]).admit()
    assert [r["leaf"] for r in rows] == ["r2"]
    # r1's output is context in the row, not a target: only r2's one token is.
    assert [t["request"] for t in rows[0]["targets"]] == ["r2"]
    assert list(rows) == cli_rows([path], tmp_path / "cli.jsonl")
    with pytest.raises(ValueError, match="not_trainable"):
        with gyre.Recorder(tmp_path / "bad.jsonl") as rec:
            rec.request("e", "r1", input=[1], output=[2], logprobs=[-0.1], not_trainable=" ")


def test_a_continuing_request_is_written_as_a_delta(tmp_path):
    path = tmp_path / "run.jsonl"
    with gyre.Recorder(path) as rec:
        rec.execution("e", t=0)
        assert rec.request("e", "r1", input=[1, 2], output=[3], logprobs=[-1.0]) is None
        # The full input of the next turn: r1's input and output, then a tool result.
        assert rec.request("e", "r2", input=[1, 2, 3, 9, 9], output=[4], logprobs=[-0.5],
                           spans=[(2, "system"), {"end": 5, "source": "tool", "call_id": "c1"}]) == "r1"
        # A retry on r1's context: no request's whole path is a prefix, full form.
        assert rec.request("e", "r3", input=[1, 2], output=[3], logprobs=[-1.0]) is None
        # Continues the latest of the longest paths that prefix it.
        assert rec.request("e", "r4", input=[1, 2, 3, 9, 9, 4, 8], output=[5], logprobs=[-0.1]) == "r2"
    recs = [r for r in lines(path) if r["kind"] == "request"]
    assert recs[1]["extends"] == "r1" and recs[1]["input"] == [9, 9]
    # Spans follow the tokens actually written: offsets shift with the delta.
    assert recs[1]["spans"] == [{"end": 2, "source": "tool", "call_id": "c1"}]
    assert "extends" not in recs[2]
    assert recs[3]["extends"] == "r2" and recs[3]["input"] == [8]
    assert run_gyre("validate", path).returncode == 0
    with gyre.Recorder(tmp_path / "full.jsonl", delta=False) as rec:
        rec.request("e", "r1", input=[1, 2], output=[3], logprobs=[-1.0])
        assert rec.request("e", "r2", input=[1, 2, 3, 9], output=[4], logprobs=[-0.5]) is None


@pytest.mark.parametrize("dtype", [np.int64, np.uint32, np.int32, np.uint16, np.int8])
def test_numpy_token_arrays_and_float32_logprobs(tmp_path, dtype):
    path = tmp_path / "np.jsonl"
    with gyre.Recorder(path) as rec:
        ids = np.arange(10, dtype=dtype)
        rec.request("e", "r1", input=ids[::2], output=ids[1:4],
                    logprobs=np.array([-0.5, -0.25, -1.5], dtype=np.float32))
    req = lines(path)[1]
    assert req["input"] == [0, 2, 4, 6, 8] and req["output"] == [1, 2, 3]
    assert req["logprobs"] == [-0.5, -0.25, -1.5]


def test_json_values_and_metadata_are_kept(tmp_path):
    path = tmp_path / "meta.jsonl"
    with gyre.Recorder(path, tokenizer="qwen3", meta={"run": 7}) as rec:
        rec.execution("e", t=np.float64(1.5), group=np.int64(3), task={"repo": "x", "files": ("a", "b")},
                      meta={"worker": 2, "gpu": None})
        rec.request(5, "r1", input=[1], output=[2], logprobs=[-0.5], agent="sub-1", purpose="summary",
                    actor="evaluator", tool_calls=[{"id": "c1", "name": "bash", "start": 0, "end": 1}],
                    finish="stop", model="m", meta={"x": [1, 2.5]})
        rec.request("e", "r2", input=[1], output=[2], meta={"reconstructed": True})
        rec.closure("e", t=2, status="timeout", artifact={"path": "p"}, version="v1", committed="r2")
        rec.assessment("e", artifact={"path": "p"}, version="v1", status="failed", t=3, error="boom",
                       attempt=1, evaluator="tests", critique="nope", branch="r2")
    recs = lines(path)
    assert recs[0] == {"kind": "header", "format": "gyre/1", "tokenizer": "qwen3", "meta": {"run": 7}}
    assert recs[1]["group"] == 3 and recs[1]["task"] == {"repo": "x", "files": ["a", "b"]}
    assert recs[2]["execution"] == "5" and recs[2]["agent"] == "sub-1"
    assert recs[2]["purpose"] == "summary" and recs[2]["actor"] == "evaluator"
    assert recs[2]["tool_calls"] == [{"id": "c1", "name": "bash", "start": 0, "end": 1}]
    assert "logprobs" not in recs[3]
    assert recs[4]["status"] == "timeout" and recs[4]["committed"] == "r2"
    assert recs[5]["error"] == "boom" and recs[5]["branch"] == "r2"
    assert run_gyre("validate", path).returncode == 0


def nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


def itself():
    meta = {"run": 1}
    meta["self"] = meta
    return meta


@pytest.mark.parametrize(
    "call, reason",
    [
        (lambda r: r.request("e", "r1", input=[1, -2], output=[3], logprobs=[-1.0]), r"got -2 \(input\[1\]\)"),
        (lambda r: r.request("e", "r1", input=[1, 2**32], output=[3], logprobs=[-1.0]), r"0\.\.2\^32.*input\[1\]"),
        (lambda r: r.request("e", "r1", input=np.array([1, -1]), output=[3], logprobs=[-1.0]), r"input\[1\]"),
        (lambda r: r.request("e", "r1", input=np.array([1.0]), output=[3], logprobs=[-1.0]), "dtype float64"),
        (lambda r: r.request("e", "r1", input=np.zeros((2, 2), dtype=np.int64), output=[3], logprobs=[-1.0]),
         "one-dimensional"),
        (lambda r: r.request("e", "r1", input=[1.5], output=[3], logprobs=[-1.0]), r"input\[0\]"),
        (lambda r: r.request("e", "r1", input=[True], output=[3], logprobs=[-1.0]), r"input\[0\]"),
        (lambda r: r.request("e", "r1", input="abc", output=[3], logprobs=[-1.0]), "not str"),
        (lambda r: r.request("e", "r1", input=[1], output=[3, 4], logprobs=[-1.0]),
         r"logprobs has 1 entry but output has 2 tokens \(logprobs\)"),
        (lambda r: r.request("e", "r1", input=[1], output=[3]), r"logprobs.*reconstructed"),
        (lambda r: r.request("e", "r1", input=[1], output=[3], logprobs=[float("nan")]), "finite"),
        (lambda r: r.request("e", "r1", input=[1], output=[3], logprobs=[-1.0], spans=[(5, "system")]), "spans"),
        (lambda r: r.request("e", "r1", input=[1], output=[3], logprobs=[-1.0], spans=[(1, "robot")]), "robot"),
        (lambda r: r.request("e", "r1", input=[1], output=[3], logprobs=[-1.0],
                             tool_calls=[{"id": "c", "start": 0, "end": 9}]), "tool_calls"),
        (lambda r: r.request("e", "r1", input=[1], output=[3], logprobs=[-1.0], purpose="chat"), "purpose"),
        (lambda r: r.request("e", "r1", input=[1], output=[3], logprobs=[-1.0], extends="r0"), "extends"),
        (lambda r: r.request("e", "r1", input=[1], output=[3], logprobs=[-1.0], meta={1: 2}), "keys must be strings"),
        (lambda r: r.execution("e", t=0, meta={"x": object()}), "cannot be written as JSON"),
        (lambda r: r.execution("e", t=0, budget_s=-1), "budget_s"),
        (lambda r: r.execution("e", t=float("nan")), "t must be a finite number"),
        (lambda r: r.request("e", "r1", input=None, output=[3], logprobs=[-1.0]), "not NoneType"),
        (lambda r: r.request("e", "r1", input=np.int64(3), output=[3], logprobs=[-1.0]), "not int64"),
        (lambda r: r.request("e", "r1", input={1: 2}, output=[3], logprobs=[-1.0]), "not dict"),
        (lambda r: r.request("e", "r1", input={1, 2}, output=[3], logprobs=[-1.0]), "not set"),
        (lambda r: r.request("e", "r1", input=[1], output=[3], logprobs=[True]), r"logprobs\[0\] must be a number"),
        # Python values that would recurse without end (or past what the loader reads back).
        (lambda r: r.execution("e", t=0, meta=itself()), r"meta\.self.*contains itself"),
        (lambda r: r.execution("e", t=0, task=nested(100_000)), "nested more than 128 levels"),
        (lambda r: r.execution("e", t=0, task=nested(127)), "recursion limit"),
        (lambda r: r.closure("e", t=1, status="done"), "status"),
        (lambda r: r.assessment("e", artifact="p", version=1, status="valid", t=1), "score"),
        (lambda r: r.assessment("e", artifact="p", version=1, status="valid", t=1, score=float("inf")), "finite"),
    ],
)
def test_bad_records_raise_value_error_and_write_nothing(tmp_path, call, reason):
    path = tmp_path / "bad.jsonl"
    with gyre.Recorder(path) as rec:
        before = rec.lines
        with pytest.raises(ValueError, match=reason):
            call(rec)
        assert rec.lines == before
    assert [r["kind"] for r in lines(path)] == ["header"]


def test_history_checks_ids_closures_and_after_closure(tmp_path):
    path = tmp_path / "h.jsonl"
    with gyre.Recorder(path) as rec:
        rec.request("e", "r1", input=[1], output=[2], logprobs=[-1.0])
        with pytest.raises(ValueError, match='request id "r1" is already used'):
            rec.request("e", "r1", input=[1], output=[2], logprobs=[-1.0])
        rec.request("other", "r1", input=[1], output=[2], logprobs=[-1.0])
        rec.closure("e", t=1)
        with pytest.raises(ValueError, match="already has a closure"):
            rec.closure("e", t=2)
        # After closure: written (the loader shows it, flagged), ids still checked.
        rec.request("e", "late", input=[1], output=[2], logprobs=[-1.0])
        with pytest.raises(ValueError, match="already used"):
            rec.request("e", "r1", input=[5], output=[6], logprobs=[-1.0])
    assert run_gyre("validate", path).returncode == 0


def test_files_exist_append_overwrite_and_closed(tmp_path):
    path = tmp_path / "run.jsonl"
    with gyre.Recorder(path) as rec:
        rec.execution("e", t=0)
        rec.request("e", "r1", input=[1, 2], output=[3], logprobs=[-1.0])
    assert rec.closed
    with pytest.raises(ValueError, match="closed"):
        rec.execution("f", t=0)
    with pytest.raises(FileExistsError, match="append=True"):
        gyre.Recorder(path)
    # A worker restarts: appending continues ids and delta encoding across the two sessions.
    with gyre.Recorder(path, append=True) as rec:
        with pytest.raises(ValueError, match="already used"):
            rec.request("e", "r1", input=[1], output=[2], logprobs=[-1.0])
        assert rec.request("e", "r2", input=[1, 2, 3, 4], output=[5], logprobs=[-1.0]) == "r1"
    # A writer killed mid-line: the cut line is dropped when appending.
    with open(path, "a") as f:
        f.write('{"kind":"request","execution":"e","id":"r3","inp')
    with gyre.Recorder(path, append=True) as rec:
        rec.closure("e", t=5)
    assert [r["kind"] for r in lines(path)] == ["header", "execution", "request", "request", "closure"]
    assert run_gyre("validate", path).returncode == 0
    with gyre.Recorder(path, overwrite=True) as rec:
        pass
    assert [r["kind"] for r in lines(path)] == ["header"]
    with pytest.raises(ValueError, match="exclude"):
        gyre.Recorder(path, append=True, overwrite=True)
    with pytest.raises(IsADirectoryError, match="name a file"):
        gyre.Recorder(tmp_path)


def test_appending_to_an_invalid_recording_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"kind":"execution","execution":"e","t":0}\n{"kind":"request","execution":"e"}\n')
    with pytest.raises(gyre.LoadError, match=r"bad\.jsonl:2:") as e:
        gyre.Recorder(path, append=True)
    assert isinstance(e.value, ValueError)
    assert e.value.diagnostics[0]["line"] == 2


def test_a_raising_block_still_closes_with_whole_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    with pytest.raises(RuntimeError):
        with gyre.Recorder(path) as rec:
            rec.execution("e", t=0)
            raise RuntimeError("rollout crashed")
    assert rec.closed
    assert [r["kind"] for r in lines(path)] == ["header", "execution"]


def test_gyre_inspect_opens_a_recorded_run(tmp_path, tmux):
    path = tmp_path / "run.jsonl"
    with gyre.Recorder(path) as rec:
        for x in ("rollout-a", "rollout-b"):
            rec.execution(x, group="g", t=0)
            rec.request(x, "r1", input=list(range(1, 40)), output=[50, 51, 52], logprobs=[-0.1] * 3)
            rec.closure(x, t=1, artifact="patch", version=1)
            rec.assessment(x, artifact="patch", version=1, status="valid", score=0.5, t=2)
    session = f"gyre-py-{time.time_ns()}"
    subprocess.run([tmux, "new-session", "-d", "-s", session, "-x", "160", "-y", "40",
                    gyre_bin(), "inspect", str(path)], check=True)
    try:
        screen = ""
        for _ in range(100):
            screen = subprocess.run([tmux, "capture-pane", "-p", "-t", session],
                                    capture_output=True, text=True).stdout
            if "rollout-b" in screen:
                break
            time.sleep(0.1)
        assert "rollout-a" in screen and "rollout-b" in screen, screen
        subprocess.run([tmux, "send-keys", "-t", session, "q"], check=True)
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], capture_output=True)
