"""gyre.load(...).admit(...): the rows `gyre admit` writes, field by field, as dicts, NumPy
arrays, a pyarrow Table (zero-copy from the engine's buffers), pandas and Parquet; what a
notebook asks about an execution; errors as exceptions with file:line."""

import errno
import json
import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gyre
from conftest import DEMO, TEMPERATURES, cli_rows, run_gyre

SETTINGS = [
    dict(cli=[], py={}),
    dict(cli=["--seed", "3", "--jmax", "2"], py=dict(seed=3, jmax=2)),
    dict(cli=["--seed", "11", "--jmax", "0", "--advantage", "grpo"], py=dict(seed=11, jmax=0, advantage="grpo")),
    dict(cli=["--priority", "sub,main", "--advantage", "none"], py=dict(priority=["sub", "main"], advantage="none")),
    dict(cli=["--seed", "5", "--priority", "main-summary,main"], py=dict(seed=5, priority="main-summary,main")),
]


@pytest.fixture(params=["demo", "synth", "temperatures"])
def recording(request, synth):
    return {"demo": DEMO, "synth": synth, "temperatures": TEMPERATURES}[request.param]


@pytest.mark.parametrize("case", SETTINGS, ids=lambda c: " ".join(c["cli"]) or "defaults")
def test_rows_equal_the_cli_rows_field_by_field(tmp_path, recording, case):
    expected = cli_rows([recording], tmp_path / "cli.jsonl", *case["cli"])
    rows = gyre.load([str(recording)]).admit(**case["py"])
    got = list(rows)
    assert len(rows) == len(expected) == len(got) > 0
    for g, e in zip(got, expected):
        assert list(g) == list(e), "same fields, same order"
        for field in e:
            assert g[field] == e[field], (e["execution"], e["draw"], field)
    assert [rows[i] for i in range(len(rows))] == expected
    assert rows[-1] == expected[-1]
    assert rows.batch_executions == expected[0]["batch_executions"]
    # Arrow (and so Parquet) rows hold the same values: `group` is a string column.
    assert rows.to_arrow().to_pylist() == expected


def test_arrow_table_shares_the_engines_buffers(synth):
    rows = gyre.load(synth).admit()
    before = pa.total_allocated_bytes()
    table = rows.to_arrow()
    grown = pa.total_allocated_bytes() - before
    # The columns were allocated by the engine and imported through the C stream interface:
    # pyarrow's own pool holds (next to) nothing of them.
    assert table.nbytes > 100_000
    assert grown < table.nbytes / 100, (grown, table.nbytes)
    schema = table.schema
    assert schema.field("tokens").type == pa.list_(pa.field("item", pa.uint32(), nullable=False))
    assert schema.field("loss_mask").type.value_type == pa.uint8()
    assert schema.field("logprobs").type.value_type == pa.float64()
    assert pa.types.is_struct(schema.field("targets").type.value_type)
    # Other Arrow consumers take the stream protocol directly.
    assert pa.table(rows).num_rows == len(rows)


def test_numpy_rows(synth, tmp_path):
    rows = gyre.load(synth).admit(seed=1)
    expected = cli_rows([synth], tmp_path / "cli.jsonl", "--seed", "1")
    for i, r in enumerate(rows.iter(numpy=True)):
        assert r["tokens"].dtype == np.uint32 and r["loss_mask"].dtype == np.uint8
        np.testing.assert_array_equal(r["tokens"], expected[i]["tokens"])
        np.testing.assert_array_equal(r["loss_mask"], expected[i]["loss_mask"])
        if expected[i]["logprobs"] is None:
            assert r["logprobs"] is None
        else:
            assert r["logprobs"].dtype == np.float64
            assert r["logprobs"].tolist() == expected[i]["logprobs"]
        response = r["tokens"][r["prompt_len"]:]
        assert len(response) == len(r["loss_mask"])
    one = rows.row(-1, numpy=True)
    np.testing.assert_array_equal(one["tokens"], expected[-1]["tokens"])


def test_pandas_and_parquet_read_back_the_jsonl_values(synth, tmp_path):
    expected = cli_rows([synth], tmp_path / "cli.jsonl", "--jmax", "3")
    rows = gyre.load(synth).admit(jmax=3)
    df = rows.to_pandas()
    assert len(df) == len(expected) and list(df.columns) == list(expected[0])
    assert df["tokens"].map(len).tolist() == [len(r["tokens"]) for r in expected]
    # The package and the CLI write the same Parquet rows.
    assert rows.write(tmp_path / "py.parquet") == len(expected)
    run_gyre("admit", synth, "--jmax", "3", "--out", tmp_path / "cli.parquet")
    for name in ("py.parquet", "cli.parquet"):
        table = pq.read_table(tmp_path / name)
        assert table.to_pylist() == expected, name
        assert pq.read_metadata(tmp_path / name).metadata[b"gyre"] == b"gyre/admitted-1"
        back = pd.read_parquet(tmp_path / name)
        assert back["execution"].tolist() == [r["execution"] for r in expected]
        assert [list(t) for t in back["tokens"]] == [r["tokens"] for r in expected]


def test_write_forms_and_refusals(tmp_path):
    rows = gyre.load(DEMO).admit()
    expected = cli_rows([DEMO], tmp_path / "cli.jsonl")
    assert rows.write(tmp_path / "rows.jsonl") == len(expected)
    assert (tmp_path / "rows.jsonl").read_text() == (tmp_path / "cli.jsonl").read_text()
    rows.write(str(tmp_path / "rows.jsonl.zst"))
    assert (tmp_path / "rows.jsonl.zst").read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    with pytest.raises(FileExistsError, match="force=True"):
        rows.write(tmp_path / "rows.jsonl")
    rows.write(tmp_path / "rows.jsonl", force=True)
    with pytest.raises(OSError):
        rows.write(tmp_path / "missing-dir" / "rows.parquet")


def test_introspection_matches_gyre_replay(synth):
    rows = gyre.load(synth).admit(seed=2, jmax=3)
    overview = rows.executions()
    stats = json.loads(run_gyre("stats", synth, "--json", "--seed", "2", "--jmax", "3").stdout)
    assert len(overview) == stats["executions"]
    for status in ("scored", "dummy", "excluded"):
        assert sum(o["status"] == status for o in overview) == stats[status]
    assert sum(o["rows"] for o in overview) == len(rows) == stats["rows"]
    assert sum(o["candidates"] for o in overview) == stats["candidates"]
    assert sum(o["draws"] for o in overview) == stats["draws"]
    for o in overview[:6]:
        x = o["execution"]
        replay = json.loads(run_gyre("replay", synth, "--execution", x, "--json", "--seed", "2", "--jmax", "3").stdout)
        detail = rows.execution(x)
        assert {k: detail[k] for k in replay} == replay
        assert detail["status"] == o["status"] and detail["reward"] == o["reward"]
        assert detail["group"] == o["group"] and detail["advantage"] == o["advantage"]
        text = run_gyre("replay", synth, "--execution", x, "--seed", "2", "--jmax", "3").stdout
        assert rows.draw_log(x) == text
    assert pd.DataFrame(overview).shape[0] == len(overview)
    with pytest.raises(KeyError, match="no execution"):
        rows.execution("nope")
    assert rows.settings == {"seed": 2, "jmax": 3, "priority": ["main", "main-summary", "sub", "sub-summary"],
                             "advantage": "drgrpo"}


def test_why_matches_gyre_why(synth):
    rows = gyre.load(synth).admit(seed=1, jmax=2)
    fates = set()
    for o in rows.executions()[:4]:
        x = o["execution"]
        replay = rows.execution(x)
        requests = [c["request"] for c in replay["candidates"]][:3] or []
        for r in requests:
            cli = json.loads(run_gyre("why", synth, "--execution", x, "--request", r, "--json",
                                      "--seed", "1", "--jmax", "2").stdout)
            got = rows.why(x, r)
            assert got == cli
            fates.add(got["fate"])
    assert "drawn" in fates
    with pytest.raises(KeyError, match="no request"):
        rows.why(rows.executions()[0]["execution"], "nope")


def test_why_with_seeds_adds_the_lens_of_gyre_why(synth):
    rows = gyre.load(synth).admit(seed=1, jmax=2)
    x = rows.executions()[0]["execution"]
    for c in rows.execution(x)["candidates"][:3]:
        r = c["request"]
        cli = json.loads(run_gyre("why", synth, "--execution", x, "--request", r, "--json",
                                  "--seed", "1", "--jmax", "2", "--seeds", "8").stdout)
        got = rows.why(x, r, seeds=8)
        assert got == cli
        assert got["lens"]["seeds"] == 8 and got["lens"]["first_seed"] == 1
    assert "lens" not in rows.why(x, r)
    with pytest.raises(ValueError, match="seeds must be 1..=4096"):
        rows.why(x, r, seeds=0)


def test_load_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"kind":"execution","execution":"e1","t":0}\n'
        '{"kind":"request","execution":"e1","id":"r1","input":[1],"output":[2,3],"logprobs":[-1]}\n'
        "{oops\n"
    )
    with pytest.raises(gyre.LoadError) as e:
        gyre.load(bad)
    message = str(e.value)
    assert f"{bad}:2: logprobs has 1 entry but output has 2 tokens (logprobs)" in message
    assert f"{bad}:3: malformed JSON" in message
    assert isinstance(e.value, ValueError)
    assert [d["line"] for d in e.value.diagnostics] == [2, 3]
    assert e.value.diagnostics[0]["field"] == "logprobs"
    batch = gyre.load([bad], lenient=True)
    assert batch.skipped_lines == 2 and len(batch.warnings) == 2
    assert batch.executions == ["e1"]
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(FileNotFoundError) as e:
        gyre.load([bad, missing])
    assert e.value.filename == str(missing) and e.value.errno == errno.ENOENT
    assert str(missing) in str(e.value)
    with pytest.raises(ValueError, match="no input files"):
        gyre.load([])


def test_load_error_pickles_with_message_and_diagnostics(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"execution","execution":"e1","t":0}\n{oops\n')
    with pytest.raises(gyre.LoadError) as e:
        gyre.load(bad)
    back = pickle.loads(pickle.dumps(e.value))
    assert type(back) is gyre.LoadError
    assert str(back) == str(e.value) and f"{bad}:2: malformed JSON" in str(back)
    assert back.diagnostics == e.value.diagnostics
    assert back.diagnostics[0]["file"] == str(bad) and back.diagnostics[0]["line"] == 2


@pytest.mark.parametrize(
    "settings, reason",
    [
        (dict(advantage="ppo"), "advantage"),
        (dict(priority=["main", "boss"]), "boss"),
        (dict(priority="main,main"), "twice"),
        (dict(seed=-1), "seed"),
        (dict(jmax=2**40), "jmax"),
    ],
)
def test_bad_settings_raise_value_error(settings, reason):
    with pytest.raises(ValueError, match=reason):
        gyre.load(DEMO).admit(**settings)


def test_compressed_inputs_and_many_files(tmp_path, synth):
    zst = tmp_path / "synth.jsonl.zst"
    run_gyre("synth", "--out", zst, "--executions", "12", "--turns", "6", "--context", "3000", "--seed", "7")
    a = gyre.load([zst, DEMO]).admit()
    b = gyre.load([synth, DEMO]).admit()
    assert list(a) == list(b) == cli_rows([synth, DEMO], tmp_path / "cli.jsonl")
    assert a.to_arrow().equals(b.to_arrow())


def test_rows_carry_the_recorded_sampling_temperature():
    # tests/fixtures/temperatures.jsonl: meta.sampling.temperature as `gyre record` writes it.
    rows = {r["execution"]: r for r in gyre.load(TEMPERATURES).admit()}
    assert rows["same"]["temperature"] == 0.7
    assert [t["temperature"] for t in rows["same"]["targets"]] == [0.7, 0.7]
    # Targets sampled at two temperatures: the row has none, each run keeps its own.
    assert rows["mixed"]["temperature"] is None
    assert [(t["request"], t["temperature"]) for t in rows["mixed"]["targets"]] == [("r1", 0.7), ("r2", 1.0)]
    assert rows["greedy"]["temperature"] == 0.0
    # Not recorded, not a number, or no targets (a dummy): unknown, never a made-up 1.0.
    for e in ("unrecorded", "garbled", "dummy"):
        assert rows[e]["temperature"] is None, e
        assert all(t["temperature"] is None for t in rows[e]["targets"]), e
    table = gyre.load(TEMPERATURES).admit().to_arrow()
    assert table.schema.field("temperature").type == pa.float64()
    assert table.schema.field("targets").type.value_type.field("temperature").type == pa.float64()
