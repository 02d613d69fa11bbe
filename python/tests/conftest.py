"""Shared helpers: the `gyre` binary of this checkout (the CLI the package must agree with) and
recordings to admit. Nothing here skips: a missing binary or tool fails the suite."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "assets" / "demo" / "example.jsonl"
# Requests with meta.sampling.temperature as `gyre record` writes it: one temperature, two, none,
# 0 (greedy), not a number, and a dummy.
TEMPERATURES = REPO / "tests" / "fixtures" / "temperatures.jsonl"


def gyre_bin() -> str:
    """The CLI to compare with: $GYRE_BIN, else the checkout's release (then debug) build."""
    env = os.environ.get("GYRE_BIN")
    candidates = [Path(env)] if env else [REPO / "target" / p / "gyre" for p in ("release", "debug")]
    for c in candidates:
        if c.is_file():
            return str(c)
    pytest.fail(f"no gyre binary at {[str(c) for c in candidates]}: run `cargo build --release` first")


def run_gyre(*args, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run([gyre_bin(), *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"gyre {' '.join(map(str, args))} failed:\n{p.stderr}")
    return p


def cli_rows(inputs, out: Path, *options) -> list:
    """The rows `gyre admit` writes for `inputs` with `options`, parsed."""
    run_gyre("admit", *inputs, *options, "--out", out)
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture(scope="session")
def synth(tmp_path_factory) -> Path:
    """A `gyre synth` recording (real Qwen3 tokens, groups of 4, sub-agents, compaction,
    retries, every scoring fate), full form."""
    path = tmp_path_factory.mktemp("synth") / "synth.jsonl"
    run_gyre("synth", "--out", path, "--executions", "12", "--turns", "6", "--context", "3000", "--seed", "7")
    return path


@pytest.fixture(scope="session")
def tmux() -> str:
    found = shutil.which("tmux")
    if not found:
        pytest.fail("tmux is needed to drive `gyre inspect` (apt-get install tmux)")
    return found
