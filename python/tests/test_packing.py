"""gyre.trainers.packing: packed sequences under a token budget whose Σ coefficients · ℓ is the
docs/format.md §6 loss of the step, however the step is packed or dealt to ranks; no execution leaves
its step; cu_seqlens, position_ids and the per-token arrays agree with the rows; the prefix-repeat
figure and the prefix-tree hook against a trie built here."""

import json

import numpy as np
import pytest

import gyre
from conftest import run_gyre
from gyre.trainers import packing


@pytest.fixture(scope="module", params=[3, 11])
def rows(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("packing") / "synth.jsonl"
    run_gyre("synth", "--out", path, "--executions", "20", "--turns", "5", "--context", "2500", "--seed", request.param)
    return gyre.load(path).admit(seed=request.param)


def token_loss(tokens, positions):
    """A causal per-token loss: depends on the token, its position and the token before it in the
    same row, as a model's loss under varlen attention does (it never sees another row)."""
    tokens = np.asarray(tokens, dtype=np.float64)
    prev = np.where(positions > 0, np.roll(tokens, 1), -1.0)
    return np.sin(0.37 * positions + 0.011 * tokens + 0.0073 * prev) + 1.5


def contract_loss(rows):
    """(1/B) Σ_i (1/L_i) Σ_{t∈T_i} ℓ_t over the executions of `rows`, each row computed alone."""
    per_exec = {}
    for r in rows.iter(numpy=True):
        n = len(r["tokens"])
        loss = token_loss(r["tokens"], np.arange(n))[r["prompt_len"] :]
        per_exec.setdefault(r["execution"], []).extend(loss[r["loss_mask"] != 0])
    b = len([e for e in rows.executions() if e["status"] != "excluded"])
    return sum(sum(v) / len(v) for v in per_exec.values() if v) / b


def packed_loss(packs):
    """Σ over packs of Σ_t coefficients[t] · ℓ[t], ℓ computed on the packed sequence."""
    return sum(float(p.coefficients @ token_loss(p.input_ids, p.position_ids)) for p in packs)


def longest(rows):
    return max(len(r["tokens"]) for r in rows.iter(numpy=True))


@pytest.mark.parametrize("slack", [1.0, 2.5])
def test_packed_loss_is_the_contract_loss_of_each_step_and_rank(rows, slack):
    budget = int(longest(rows) * slack)
    steps = rows.steps(executions=6)
    assert len(steps) > 1
    for step in steps:
        want = contract_loss(step)
        packs = packing(step, max_tokens=budget)
        assert len(packs) > 1
        assert packed_loss(packs) == pytest.approx(want, rel=1e-12)
        # Dealt to two ranks, each rank packing its own rows: the sum over ranks is the same.
        ranks = step.shard(world_size=2)
        assert sum(packed_loss(packing(r, max_tokens=budget)) for r in ranks) == pytest.approx(want, rel=1e-12)


def test_packs_never_split_an_execution_across_steps(rows):
    budget = longest(rows)
    steps = rows.steps(executions=5)
    per_step = packing.pack_steps(rows, executions=5, max_tokens=budget)
    assert len(per_step) == len(steps)
    seen = set()
    for step, packs in zip(steps, per_step):
        in_packs = [e for p in packs for e in p.executions]
        assert set(in_packs) == {r["execution"] for r in step}
        assert not seen & set(in_packs)
        seen |= set(in_packs)
        # Every row of the step exactly once, in row order.
        assert np.concatenate([p.rows for p in packs]).tolist() == list(range(len(step)))


@pytest.mark.parametrize("dummy", ["short", "full"])
def test_cu_seqlens_positions_and_per_token_arrays_agree_with_the_rows(rows, dummy):
    step = rows.steps(executions=7)[0]
    budget = longest(step) * 2
    # The rows as packing lays them out (a short dummy keeps one prompt and one response token).
    recs, coefs = gyre.trainers.layout(step, dummy=dummy)
    if dummy == "full":
        assert all(np.array_equal(r["tokens"], o["tokens"]) for r, o in zip(recs, step.iter(numpy=True)))
    packs = packing(step, max_tokens=budget, dummy=dummy)
    for p in packs:
        cu = p.cu_seqlens
        assert cu.dtype == np.int32 and cu[0] == 0 and cu[-1] == len(p.input_ids) <= budget
        assert np.all(np.diff(cu) > 0) and len(cu) == len(p.rows) + 1
        lens = np.diff(cu)
        assert p.max_seqlen == lens.max()
        np.testing.assert_array_equal(p.position_ids, np.concatenate([np.arange(n) for n in lens]))
        for k, (lo, hi) in zip(p.rows, zip(cu[:-1], cu[1:])):
            r, c, pl = recs[k], coefs[k], recs[k]["prompt_len"]
            assert p.executions[list(p.rows).index(k)] == r["execution"]
            np.testing.assert_array_equal(p.input_ids[lo:hi], r["tokens"])
            np.testing.assert_array_equal(p.coefficients[lo : lo + pl], 0.0)
            np.testing.assert_array_equal(p.coefficients[lo + pl : hi], c)
            np.testing.assert_array_equal(p.loss_mask[lo + pl : hi], r["loss_mask"] != 0)
            assert not p.loss_mask[lo : lo + pl].any()
            m = r["loss_mask"] != 0
            np.testing.assert_array_equal(p.old_log_probs[lo + pl : hi][m], r["logprobs"][m])
            assert np.all(p.advantages[lo + pl : hi] == r["advantage"])
    # A budget of the longest row packs the next row into a fresh pack exactly when it would not fit.
    tight = packing(step, max_tokens=longest(step), dummy=dummy)
    for a, b in zip(tight, tight[1:]):
        assert a.cu_seqlens[-1] + len(recs[b.rows[0]]["tokens"]) > longest(step)


def test_a_row_longer_than_the_budget_is_an_error_naming_it(rows):
    step = rows.steps(executions=4)[0]
    recs = gyre.trainers.layout(step)[0]
    k = max(range(len(recs)), key=lambda i: len(recs[i]["tokens"]))
    with pytest.raises(ValueError, match=f"row {k} \\(execution '{recs[k]['execution']}'.*max_tokens={len(recs[k]['tokens']) - 1}"):
        packing(step, max_tokens=len(recs[k]["tokens"]) - 1)
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        packing(step, max_tokens=0)


def trie_nodes(seqs):
    """Distinct prefix-tree tokens, counted with a dict trie."""
    root, nodes = {}, 0
    for s in seqs:
        node = root
        for t in s.tolist():
            if t not in node:
                node[t] = {}
                nodes += 1
            node = node[t]
    return nodes


def test_prefix_repeat_and_the_prefix_tree_hook(rows):
    step = rows.steps(executions=6)[0]
    packs = packing(step, max_tokens=longest(step) * 3)
    for p in packs:
        segs = p.segments()
        order, parent, shared = p.prefix_tree()
        assert sorted(order.tolist()) == list(range(len(segs)))
        assert parent[0] == -1 and shared[0] == 0
        for j in range(1, len(order)):
            assert parent[j] in order[:j].tolist()
            child, par = segs[order[j]], segs[parent[j]]
            np.testing.assert_array_equal(child[: shared[j]], par[: shared[j]])
        distinct = trie_nodes(segs)
        assert sum(len(s) for s in segs) - shared.sum() == distinct
        assert p.prefix_repeat == pytest.approx(sum(len(s) for s in segs) / distinct, rel=1e-15)
    whole = [r["tokens"] for r in step.iter(numpy=True)]
    figure = packing.prefix_repeat(step)
    assert figure == pytest.approx(sum(len(s) for s in whole) / trie_nodes(whole), rel=1e-15)
    assert figure > 1.5  # synth's rows repeat their executions' shared prefixes


def test_gyre_stats_reports_the_same_prefix_repeat(tmp_path):
    # The engine's figure (`gyre stats`) over the rows `gyre admit` writes is this module's,
    # counted with an independent trie.
    path = tmp_path / "synth.jsonl"
    run_gyre("synth", "--out", path, "--executions", "12", "--turns", "5", "--context", "3000", "--seed", 4)
    for jmax in ("5", "1", "0"):
        stats = json.loads(run_gyre("stats", path, "--jmax", jmax, "--json").stdout)
        rows = gyre.load(path).admit(jmax=int(jmax))
        whole = [r["tokens"] for r in rows.iter(numpy=True)]
        assert stats["row_tokens"] == rows.tokens == sum(len(s) for s in whole)
        assert stats["row_prefix_tokens"] == trie_nodes(whole)
        assert stats["prefix_repeat"] == pytest.approx(packing.prefix_repeat(rows), rel=1e-12)
