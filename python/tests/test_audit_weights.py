"""`gyre audit --json`'s per-execution weights (`weights.executions`, docs/audit.md) against the
trainers' own loss code: each token's weight is the gradient of the trainer's aggregated loss with
respect to that token's loss (verl's agg_loss through autograd; SkyRL's
apply_loss_reduction_to_advantages_minibatch, whose scaled unit advantages are the weights), summed
over an execution's mask-on tokens in its step. slime and prime-rl are not on the package registry:
their reductions are written out as test_trainers.py reads them, at the commits cited there."""

import json
import os
import sys
import types
from collections import defaultdict

import numpy as np
import pytest
import torch

from conftest import run_gyre

import skyrl as _skyrl  # noqa: E402

# As in test_trainers.py: skyrl.backends/__init__ imports the Tinker backend, whose pydantic
# models need Python 3.12; the training utilities under it do not.
_backends = types.ModuleType("skyrl.backends")
_backends.__path__ = [os.path.join(os.path.dirname(_skyrl.__file__), "backends")]
sys.modules.setdefault("skyrl.backends", _backends)

from skyrl.backends.skyrl_train.utils.ppo_utils import apply_loss_reduction_to_advantages_minibatch  # noqa: E402
from verl.trainer.ppo.core_algos import agg_loss  # noqa: E402

# (step, execution, sample, response mask): two steps; executions of one to three samples,
# long and short; a sample with every mask off; an execution with no mask-on token.
SAMPLES = [
    (0, "a", "1", [1] * 40 + [0] * 5),
    (0, "a", "2", [0] * 3 + [1] * 12),
    (0, "b", "1", [1, 1, 0, 1]),
    (0, "c", "1", [1] * 9),
    (0, "c", "2", [0] * 6),
    (0, "c", "3", [1] * 30),
    (0, "d", "1", [0, 0, 0]),
    (1, "a", "3", [1] * 7),
    (1, "e", "1", [1] * 70 + [0, 1]),
    (1, "f", "1", [1, 0, 1]),
]
PROMPT = 4


def dump(tmp_path, loss_agg):
    path = tmp_path / f"{loss_agg}.jsonl"
    lines = [{"kind": "header", "format": "gyre/1", "trainer": {"name": "test", "loss_agg": loss_agg}}]
    for step, e, s, mask in SAMPLES:
        ids = list(range(100, 100 + PROMPT + len(mask)))
        lines.append(
            {"kind": "trained", "execution": e, "sample": s, "step": step, "prompt_len": PROMPT,
             "tokens": [{"ids": ids}], "loss_mask": mask}
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def audited(tmp_path, loss_agg):
    p = run_gyre("audit", dump(tmp_path, loss_agg), "--json", check=False)
    assert p.returncode in (0, 1), p.stderr
    w = json.loads(p.stdout)["weights"]
    assert w["loss_agg"] == loss_agg
    return {(x["step"], x["execution"]): x["weight"] for x in w["executions"]}


def steps():
    by = defaultdict(list)
    for step, e, _, mask in SAMPLES:
        by[step].append((e, mask))
    return by


def per_execution(step_samples, token_weights):
    """Σ over each execution's mask-on tokens of the per-token weights (one row per sample)."""
    out = defaultdict(float)
    for (e, mask), w in zip(step_samples, token_weights):
        out[e] += float(np.sum(np.asarray(w)[: len(mask)] * np.asarray(mask)))
    return out


def padded(step_samples):
    width = max(len(m) for _, m in step_samples)
    mask = torch.zeros(len(step_samples), width)
    for k, (_, m) in enumerate(step_samples):
        mask[k, : len(m)] = torch.tensor(m, dtype=torch.float32)
    return mask


def verl_weights(mode, step_samples):
    """verl's agg_loss as its FSDP engine calls it for one mini-batch: global_batch_size = the
    mini-batch's samples (ray_trainer passes ppo_mini_batch_size), batch_num_tokens = its mask
    sum; loss_scale_factor left to verl's default (the padded response width)."""
    mask = padded(step_samples)
    loss_mat = torch.zeros_like(mask, dtype=torch.float64, requires_grad=True)
    loss = agg_loss(
        loss_mat, mask.double(), mode, dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=len(step_samples)
    )
    loss.backward()
    return per_execution(step_samples, loss_mat.grad.numpy())


def skyrl_weights(reduction, step_samples):
    """SkyRL scales the advantages per mini-batch, then sums the per-token loss: with unit
    advantages, the scaled ones are each token's weight (max_seq_len = the longest response)."""
    mask = padded(step_samples).double()
    scaled = apply_loss_reduction_to_advantages_minibatch(
        torch.ones_like(mask), mask, reduction, micro_batch_size=len(step_samples), max_seq_len=mask.shape[1]
    )
    return per_execution(step_samples, scaled.numpy())


def slime_weights(step_samples):
    """slime at THUDM/slime 624b824a (default, no --calculate-per-token-loss): each sample's masked
    loss over its rollout's mask total (`rollout_mask_sums`, clamped to 1), times
    num_microbatches / step_global_batch_size (the step's rollouts), averaged over micro-batches:
    1 / (L_rollout · R) per mask-on token, rollout_id = execution."""
    totals = defaultdict(int)
    for e, m in step_samples:
        totals[e] += sum(m)
    rollouts = len(totals)
    return per_execution(step_samples, [np.full(len(m), 1.0 / (max(totals[e], 1) * rollouts)) for e, m in step_samples])


def prime_rl_weights(step_samples):
    """prime-rl at PrimeIntellect-ai/prime-rl 559b4477: each token's loss over rl_scale, the
    step's mask-on tokens (all micro-batches and ranks)."""
    rl_scale = max(sum(sum(m) for _, m in step_samples), 1)
    return per_execution(step_samples, [np.full(len(m), 1.0 / rl_scale) for _, m in step_samples])


CASES = [
    ("token-mean", lambda s: verl_weights("token-mean", s)),
    ("token-mean", lambda s: skyrl_weights("token_mean", s)),
    ("token-mean", prime_rl_weights),
    ("seq-mean-token-mean", lambda s: verl_weights("seq-mean-token-mean", s)),
    ("seq-mean-token-mean", lambda s: skyrl_weights("sequence_mean", s)),
    ("seq-mean-token-sum", lambda s: verl_weights("seq-mean-token-sum", s)),
    ("seq-mean-token-sum-norm", lambda s: verl_weights("seq-mean-token-sum-norm", s)),
    ("seq-mean-token-sum-norm", lambda s: skyrl_weights("seq_mean_token_sum_norm", s)),
    ("execution-mean", slime_weights),
]


@pytest.mark.parametrize(
    "loss_agg,trainer",
    CASES,
    ids=["verl-token-mean", "skyrl-token_mean", "prime-rl", "verl-seq-mean-token-mean", "skyrl-sequence_mean",
         "verl-seq-mean-token-sum", "verl-seq-mean-token-sum-norm", "skyrl-seq_mean_token_sum_norm", "slime"],
)
def test_audit_weights_are_the_trainers_own(tmp_path, loss_agg, trainer):
    got = audited(tmp_path, loss_agg)
    want = {}
    for step, samples in steps().items():
        for e, w in trainer(samples).items():
            want[(step, e)] = w
    assert got.keys() == want.keys()
    # rel 1e-7: verl's seq-mean-token-mean divides each sample by its token count + 1e-8.
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-7, abs=1e-15), k


def test_the_spread_names_the_heaviest_and_lightest_and_is_a_finding_beyond_the_bound(tmp_path):
    p = run_gyre("audit", dump(tmp_path, "token-mean"), "--json", check=False)
    out = json.loads(p.stdout)
    w = out["weights"]
    # Step 1 under token-mean: e trains 71 tokens, f 2.
    assert (w["step"], w["heaviest"]["execution"], w["lightest"]["execution"]) == (1, "e", "f")
    assert w["spread"] == pytest.approx(71 / 2)
    spread = [f for f in out["findings"] if f["kind"] == "weight_spread"]
    assert [(f["execution"], f["sample"]) for f in spread] == [("a", "1"), ("e", "1")]
    assert out["by_kind"]["weight_spread"] == 2
    assert p.returncode == 1
