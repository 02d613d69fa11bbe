"""Rows.coefficients(), Rows.steps(), Rows.shard() and gyre.torch.loss: the docs/format.md §6 loss of each
step (whole executions, its own B), the same however a step is dealt to ranks or cut into
micro-batches."""

import numpy as np
import pytest
import torch

import gyre
import gyre.torch as gt
from conftest import run_gyre


@pytest.fixture(scope="module", params=[3, 11])
def rows(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("steps") / "synth.jsonl"
    run_gyre("synth", "--out", path, "--executions", "20", "--turns", "5", "--context", "2500", "--seed", request.param)
    return gyre.load(path).admit(seed=request.param)


def counted(rows):
    return [e["execution"] for e in rows.executions() if e["status"] != "excluded"]


def token_losses(rows, seed):
    """A random per-token loss for every response token, keyed by (execution, draw)."""
    rng = np.random.default_rng(seed)
    return {(r["execution"], r["draw"]): rng.normal(size=len(r["loss_mask"])) for r in rows}


def contract_loss(rows, losses):
    """(1/B) Σ_i (1/L_i) Σ_{t∈T_i} ℓ_t over the executions of `rows`, B = those counted."""
    per_exec = {}
    for r in rows:
        m = np.asarray(r["loss_mask"], dtype=bool)
        per_exec.setdefault(r["execution"], []).extend(losses[(r["execution"], r["draw"])][m])
    b = len(counted(rows))
    return sum(sum(v) / len(v) for v in per_exec.values() if v) / b


def test_coefficients_are_mask_times_weight_over_b(rows):
    coefs = rows.coefficients()
    assert len(coefs) == len(rows)
    for r, c in zip(rows.iter(numpy=True), coefs):
        assert c.dtype == np.float64 and len(c) == len(r["tokens"]) - r["prompt_len"]
        np.testing.assert_array_equal(c, r["loss_mask"] * r["weight"] / r["batch_executions"])
    # Each execution with targets sums to 1/B; one without adds zero.
    sums = {}
    for r, c in zip(rows, coefs):
        sums[r["execution"]] = sums.get(r["execution"], 0.0) + c.sum()
    for e in rows.executions():
        if e["status"] == "excluded":
            assert e["execution"] not in sums
        elif e["exec_targets"]:
            assert sums[e["execution"]] == pytest.approx(1 / rows.batch_executions, rel=1e-12)
        else:
            assert sums.get(e["execution"], 0.0) == 0.0


def test_steps_hold_whole_executions_with_their_own_b(rows):
    ids = counted(rows)
    for n in (1, 3, 7, len(ids), len(ids) + 5):
        steps = rows.steps(executions=n)
        assert [i for s in steps for i in s.execution_ids] == ids
        assert sum(len(s) for s in steps) == len(rows)
        for k, s in enumerate(steps):
            assert s.batch_executions == len(s.execution_ids) == (n if k + 1 < len(steps) else len(s.execution_ids))
            assert not s.is_batch and s.step_rows == len(s) and s.step_targets == s.targets
            got = list(s)
            assert {r["batch_executions"] for r in got} == {s.batch_executions}
            assert s.to_arrow().to_pylist() == got
            whole = {(r["execution"], r["draw"]): r for r in rows}
            for r in got:
                want = dict(whole[(r["execution"], r["draw"])], batch_executions=s.batch_executions)
                assert r == want
    with pytest.raises(ValueError, match="positive"):
        rows.steps(executions=0)
    with pytest.raises(ValueError, match="view"):
        rows.steps(executions=2)[0].write("/nonexistent/x.jsonl")


def test_shards_keep_the_steps_b_and_loss(rows):
    losses = token_losses(rows, 0)
    for step in rows.steps(executions=8):
        want = contract_loss(step, losses)
        for k in (1, 2, 3, 5, 16):
            ranks = step.shard(world_size=k)
            assert len(ranks) == k
            assert sorted(i for r in ranks for i in r.execution_ids) == sorted(step.execution_ids)
            assert {r.batch_executions for r in ranks} == {step.batch_executions}
            assert {(r.step_rows, r.step_targets) for r in ranks} == {(len(step), step.targets)}
            tokens = [r.tokens for r in ranks]
            assert sum(tokens) == step.tokens
            # DDP averages the ranks' gradients: each rank's loss is world_size · its sum.
            got = 0.0
            for r in ranks:
                per_token = [torch.tensor(losses[(x["execution"], x["draw"])]) for x in r]
                got += float(gt.loss(per_token, r.coefficients(), world_size=k)) / k
            assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_micro_batching_inside_a_rank_does_not_change_the_loss(rows):
    """A rank's rows cut into micro-batches of any sizes, in any order, their losses summed
    (gradient accumulation without averaging): the rank's loss, and its gradient, exactly."""
    rng = np.random.default_rng(5)
    step = rows.steps(executions=10)[0]
    rank = step.shard(world_size=2)[1]
    c = gt.coefficients(rank, dtype=torch.float64)
    logits = torch.tensor(rng.normal(size=tuple(c.shape)), requires_grad=True)
    whole = gt.loss(torch.nn.functional.softplus(logits), c)
    (g_whole,) = torch.autograd.grad(whole, logits)
    for _ in range(5):
        order = rng.permutation(len(rank))
        cuts = np.sort(rng.choice(np.arange(1, len(rank)), size=min(3, len(rank) - 1), replace=False))
        total = torch.zeros((), dtype=torch.float64)
        for mb in np.split(order, cuts):
            idx = torch.as_tensor(mb)
            total = total + gt.loss(torch.nn.functional.softplus(logits[idx]), c[idx])
        (g,) = torch.autograd.grad(total, logits)
        assert float(total.detach()) == pytest.approx(float(whole.detach()), rel=1e-12)
        torch.testing.assert_close(g, g_whole, rtol=1e-12, atol=1e-18)


def test_loss_checks_shapes():
    c = torch.ones(2, 3)
    with pytest.raises(ValueError, match="same rows"):
        gt.loss(torch.ones(3, 3), c)
    with pytest.raises(ValueError, match="cut short"):
        gt.loss(torch.ones(2, 2), c)
    assert float(gt.loss(torch.ones(2, 3), c, world_size=4)) == 24.0
