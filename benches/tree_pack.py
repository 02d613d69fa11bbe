"""Tree packs against flat rows, in one run: forward-backward tokens per step on `gyre synth` batches,
the README demo and real Claude Code imports at J_max 1, 5 and uncapped (one tree, and under a
budget with what its cuts recompute), then CPU forward+backward wall time of a small Qwen3-architecture
model (random weights, fp32), tree packs vs flat rows, on one step.

Run (after `cargo build --release` and installing the package, see HELPERS or python/README.md):
    GYRE_BIN=target/release/gyre python benches/tree_pack.py [--budget 32768] [--timing-step 2]

Nothing here is asserted: the tests (python/tests/test_tree.py) check exactness; this measures.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import gyre
import gyre.trainers
from gyre.trainers.packing import _repeat

REPO = Path(__file__).resolve().parents[1]
GYRE = os.environ.get("GYRE_BIN", str(REPO / "target" / "release" / "gyre"))
CLAUDE = REPO / "tests" / "fixtures" / "import" / "claude-code"


def gyre_cli(*args):
    subprocess.run([GYRE, *map(str, args)], check=True, capture_output=True)


def inputs(tmp: Path):
    synth32 = tmp / "synth32.jsonl"
    gyre_cli("synth", "--out", synth32, "--executions", "32", "--seed", "0")
    small = tmp / "synth4.jsonl"
    gyre_cli("synth", "--out", small, "--executions", "4", "--turns", "8", "--context", "400", "--seed", "3")
    claude = []
    for name in ["short", "tool_heavy", "8463c716-a2ea-4c14-9efa-87158ebd9f20"]:
        out = tmp / f"{name}.jsonl"
        gyre_cli("import", "claude-code", CLAUDE / f"{name}.jsonl", "--score", "1", "--out", out)
        claude.append(out)
    return {
        "synth 32 executions": [synth32],
        "synth 4 executions (tests)": [small],
        "README demo": [REPO / "assets" / "demo" / "example.jsonl"],
        "Claude Code (3 real sessions)": claude,
    }, small


def token_figures(name, paths, budget):
    print(f"\n{name}")
    print(f"  {'J_max':<9}{'rows':>6}{'flat':>10}{'tree':>10}{'ratio':>8}{'repeat':>8}"
          f"{'budget':>9}{'packs':>7}{'recomputed':>12}{'ratio':>8}")
    for jmax in (1, 5, 0):
        rows = gyre.load(paths).admit(jmax=jmax)
        recs = [r for r in rows.iter(numpy=True) if r["loss_mask"].any()]
        whole = gyre.trainers.tree(rows)
        # A budget below the longest row is an error: such a step gets the longest row's.
        limit = max(budget, max(len(r["tokens"]) for r in recs))
        cut = gyre.trainers.tree(rows, max_tokens=limit)
        repeat = _repeat([r["tokens"] for r in recs])
        print(f"  {jmax or 'uncapped':<9}{len(recs):>6}{whole.row_tokens:>10}{whole.packed_tokens:>10}"
              f"{whole.token_ratio:>7.2f}×{repeat:>7.2f}×{limit:>9}{len(cut):>7}{cut.recomputed:>12}"
              f"{cut.token_ratio:>7.2f}×")


def tiny_qwen3(vocab):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=1 << 17, tie_word_embeddings=False,
        attn_implementation="sdpa",
    )
    return Qwen3ForCausalLM(config).float()


def timing(path, executions, budget, repeats=3):
    rows = gyre.load(path).admit(jmax=5)
    step = rows.steps(executions=executions)[0]
    recs = [r for r in step.iter(numpy=True) if r["loss_mask"].any()]
    vocab = np.unique(np.concatenate([r["tokens"] for r in recs]))
    ids = lambda t: torch.as_tensor(np.searchsorted(vocab, t))[None]  # noqa: E731
    model = tiny_qwen3(len(vocab))
    packs = gyre.trainers.tree(step, max_tokens=budget)

    def flat():
        for r in recs:
            offsets = r["prompt_len"] + np.flatnonzero(r["loss_mask"])
            out = model(input_ids=ids(r["tokens"]), logits_to_keep=torch.as_tensor(offsets - 1))
            out.logits.float().logsumexp(-1).sum().backward()

    def tree():
        for p in packs:
            out = model(
                input_ids=ids(p.input_ids),
                position_ids=torch.as_tensor(p.position_ids)[None],
                attention_mask=p.torch_mask(),
                logits_to_keep=torch.as_tensor(p.target_pos),
            )
            out.logits.float().logsumexp(-1).sum().backward()

    def best(f):
        times = []
        for _ in range(repeats):
            model.zero_grad()
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return min(times)

    flat_s, tree_s = best(flat), best(tree)
    flat_tokens = sum(len(r["tokens"]) for r in recs)
    dense = sum(len(p) ** 2 for p in packs)
    causal = sum(len(r["tokens"]) * (len(r["tokens"]) + 1) // 2 for r in recs)
    print(f"\nCPU forward+backward, one step of {executions} executions (J_max 5, {len(recs)} rows), "
          f"{torch.get_num_threads()} threads, best of {repeats}:")
    print(f"  flat rows   {flat_tokens:>7} tokens  {flat_s:7.2f} s")
    print(f"  tree packs  {packs.packed_tokens:>7} tokens  {tree_s:7.2f} s   ({len(packs)} packs, "
          f"budget {budget}, recomputed {packs.recomputed})")
    print(f"  tokens {flat_tokens / packs.packed_tokens:.2f}× fewer, wall time {flat_s / tree_s:.2f}× less")
    blocks = 0
    kept = 0
    for p in packs:
        n = len(p)
        m = p.attention_mask()
        for q0 in range(0, n, 128):
            for k0 in range(0, q0 + 1, 128):
                blocks += 1
                kept += bool(m[q0 : q0 + 128, k0 : k0 + 128].any())
    print(f"  attention cells: flat rows (causal) {causal}, tree packs dense {dense} "
          f"({dense / causal:.2f}× flat); allowed by the tree {sum(int(p.attention_mask().sum()) for p in packs)}")
    print(f"  FlexAttention 128×128 blocks: {kept} of {blocks} lower-triangle blocks hold an allowed cell "
          f"({kept / blocks:.0%}): the share of the dense pack's attention a BlockMask computes on a GPU")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=32768)
    ap.add_argument("--timing-step", type=int, default=2, help="executions in the timed step")
    ap.add_argument("--timing-budget", type=int, default=8192)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        batches, small = inputs(Path(d))
        print("forward-backward tokens per step (the whole batch as one step); ratio = flat / tree,")
        print("repeat = the rows' prefix repeat (rows with targets); under the budget: packs, recomputed prefix tokens")
        for name, paths in batches.items():
            token_figures(name, paths, a.budget)
        timing(small, a.timing_step, a.timing_budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
