"""The adapters (gyre.trainers.*) run through each trainer's own aggregation code from PyPI
(verl's compute_policy_loss_vanilla / agg_loss, skyrl's apply_loss_reduction_to_advantages_minibatch
and ppo_policy_loss, TRL's GRPOTrainer._compute_loss; CPU torch), dealt to data-parallel ranks and
cut into micro-batches: each execution's aggregate weight W_i·B is 1 and the loss is the docs/format.md §6
loss for random per-token ratios, clipping included. slime and prime-rl are not on the registry:
their reductions are checked as written at the commits their adapters' docstrings cite."""

import os
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import gyre
from conftest import TEMPERATURES, run_gyre
from gyre.trainers import prime_rl, skyrl, slime, trl, verl

EPS_LOW, EPS_HIGH, CLIP_C = 0.2, 0.28, 3.0


@pytest.fixture(scope="module", params=[21, 22])
def rows(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("trainers") / "synth.jsonl"
    run_gyre("synth", "--out", path, "--executions", "16", "--turns", "4", "--context", "2000", "--seed", request.param)
    return gyre.load(path).admit(seed=request.param, advantage="grpo")


class UnitAdvantage:
    """`rows` with every advantage 1: what the adapters write is then the token's weight."""

    def __init__(self, rows):
        self._rows = rows
        for k in ("batch_executions", "step_rows", "step_targets"):
            setattr(self, k, getattr(rows, k))

    def iter(self, numpy=False):
        for r in self._rows.iter(numpy=numpy):
            yield dict(r, advantage=1.0)

    def coefficients(self):
        return self._rows.coefficients()


def noise(step, seed):
    """log(current / old policy) per token of the row's path, keyed by (execution, draw): ratios
    from 0.55 to 1.8, so both clips bite. Indexed by path position, so that any layout of the row
    (gyre.trainers.layout) meets the same ratio at the same token."""
    rng = np.random.default_rng(seed)
    return {(r["execution"], r["draw"]): rng.uniform(-0.6, 0.6, size=len(r["tokens"])) for r in step}


def response_ratios(log_ratios, recs):
    """Each (laid-out) row's log-ratios over its response, `tokens[prompt_len:]`."""
    return [log_ratios[(r["execution"], r["draw"])][r["prompt_len"] : len(r["tokens"])] for r in recs]


def laid_out(rows, layout):
    """`rows`' NumPy rows as an adapter given `layout` (keyword arguments) lays them out."""
    return gyre.trainers.layout(rows, **layout)[0]


def surrogate(a, log_ratio, dual_clip=False):
    r = np.exp(log_ratio)
    loss = np.maximum(-a * r, -a * np.clip(r, 1 - EPS_LOW, 1 + EPS_HIGH))
    if dual_clip and a < 0:
        loss = np.minimum(loss, -a * CLIP_C)
    return loss


def contract_loss(step, log_ratios, dual_clip=False):
    """(1/B) Σ_i (1/L_i) Σ_{t∈T_i} ℓ_t, ℓ the clipped surrogate with the execution's advantage."""
    per_exec = {}
    for r in step.iter(numpy=True):
        m = r["loss_mask"].astype(bool)
        lr = log_ratios[(r["execution"], r["draw"])][r["prompt_len"] :]
        ell = surrogate(r["advantage"] or 0.0, lr, dual_clip)[m]
        per_exec.setdefault(r["execution"], []).extend(ell)
    return sum(np.mean(v) for v in per_exec.values() if v) / step.batch_executions


def padded(arrays, width):
    out = torch.zeros(len(arrays), width, dtype=torch.float64)
    for k, a in enumerate(arrays):
        out[k, : len(a)] = torch.as_tensor(a)
    return out


def micro_batches(n, rng):
    """Row indices 0..n cut into 1–3 micro-batches of random sizes."""
    if n <= 1:
        return [np.arange(n)]
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(2, n - 1), replace=False))
    return np.split(np.arange(n), cuts)


def unit_weights(parts):
    """W_i from a unit-advantage run at ratio 1, where the loss is -Σ_t w_t·a_t: per execution,
    -Σ over its tokens of (∂loss/∂a_t)·a_t. `parts` pairs an advantages leaf with its rows."""
    w = {}
    for adv, recs in parts:
        for r, g, a in zip(recs, adv.grad, adv.detach()):
            n = len(r["loss_mask"])
            w[r["execution"]] = w.get(r["execution"], 0.0) - float((g[:n] * a[:n]).sum())
    return w


def check_weights(step, w, rel=1e-9):
    """Each counted execution's aggregate weight W_i·B is 1 (0 without targets)."""
    for e in step.executions():
        if e["status"] == "excluded":
            continue
        want = 1.0 if e["exec_targets"] else 0.0
        assert w.get(e["execution"], 0.0) * step.batch_executions == pytest.approx(want, rel=rel, abs=1e-12)


# --- verl -------------------------------------------------------------------------------------

from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla  # noqa: E402


def verl_step_loss(step, world, mode, log_ratios, seed, unit=False, scale_factor=None, layout={}):
    """verl's loss over one step: each rank's micro-batch losses summed (FSDP backward per
    micro-batch), the ranks' averaged (DDP). Returns the loss and, per rank, its advantages
    tensor (a leaf with `unit`: the loss's gradient gives each token's weight) and rows."""
    rng = np.random.default_rng(seed)
    total = 0.0
    parts = []
    for rank in step.shard(world_size=world):
        if len(rank) == 0:
            continue
        src = UnitAdvantage(rank) if unit else rank
        dp = verl(src, loss_agg_mode=mode, dp_size=world, dtype=torch.float64, loss_scale_factor=scale_factor, **layout)
        assert isinstance(dp, DataProto)
        b = dp.batch
        info = dp.meta_info["agg_loss_kwargs"]
        cfg = OmegaConf.create(
            {"clip_ratio": EPS_LOW, "clip_ratio_low": EPS_LOW, "clip_ratio_high": EPS_HIGH, "clip_ratio_c": CLIP_C, "global_batch_info": info}
        )
        recs = laid_out(rank, layout)
        width = b["responses"].shape[1]
        lr = padded(response_ratios(log_ratios, recs), width)
        adv = b["advantages"].clone().requires_grad_(unit)
        old = b["old_log_probs"]
        for mb in micro_batches(len(recs), rng):
            idx = torch.as_tensor(mb)
            pg, _ = compute_policy_loss_vanilla(
                old[idx], old[idx] + (0 if unit else lr[idx]), adv[idx], b["response_mask"][idx], loss_agg_mode=mode, config=cfg
            )
            total = total + pg / world
        parts.append((adv, recs))
    return total, parts


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "token-sum", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("world", [1, 3])
def test_verl_keeps_the_contract(rows, mode, world):
    factor = 4096.0 if mode == "seq-mean-token-sum-norm" else None
    for k, step in enumerate(rows.steps(executions=6)):
        lr = noise(step, k)
        got, _ = verl_step_loss(step, world, mode, lr, k, scale_factor=factor)
        assert float(got) == pytest.approx(contract_loss(step, lr, dual_clip=True), rel=1e-9, abs=1e-12)
        # Weights: at ratio 1 with unit advantages the loss is -Σ_t w_t a_t.
        loss, parts = verl_step_loss(step, world, mode, lr, k, unit=True, scale_factor=factor)
        loss.backward()
        check_weights(step, unit_weights(parts))


def test_verl_dataproto_fields(rows):
    step = rows.steps(executions=4)[0]
    dp = verl(step)
    b = dp.batch
    recs = laid_out(step, {})
    for k, r in enumerate(recs):
        p, n = r["prompt_len"], len(r["tokens"]) - r["prompt_len"]
        ids = b["input_ids"][k][b["attention_mask"][k].bool()]
        np.testing.assert_array_equal(ids.numpy(), r["tokens"].astype(np.int64))
        np.testing.assert_array_equal(b["response_mask"][k][:n].numpy(), r["loss_mask"])
        assert int(b["response_mask"][k][n:].sum()) == 0
        np.testing.assert_allclose(b["old_log_probs"][k][:n].numpy(), r["logprobs"], rtol=1e-6)
        if p + n:
            assert int(b["position_ids"][k][b["attention_mask"][k].bool()][-1]) == p + n - 1
        assert dp.non_tensor_batch["execution"][k] == r["execution"]
    assert dp.meta_info["agg_loss_kwargs"]["batch_num_tokens"] == step.targets
    assert dp.meta_info["agg_loss_kwargs"]["global_batch_size"] == len(step)


# --- TRL --------------------------------------------------------------------------------------

from collections import defaultdict  # noqa: E402

from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402


class _TrlSelf:
    """The attributes GRPOTrainer._compute_loss reads, set as a dapo run with beta=0 on
    `world` processes sets them; the model's per-token log-probs are the given ones."""

    def __init__(self, world, loss_type="dapo"):
        self.loss_type = loss_type
        self.beta = 0.0
        self.epsilon_low, self.epsilon_high = EPS_LOW, EPS_HIGH
        self.importance_sampling_level = "token"
        self.top_entropy_quantile = 1.0
        self.off_policy_mask_threshold = None
        self.use_vllm = False
        self.vllm_importance_sampling_correction = False
        self.aux_loss_enabled = False
        self._entropy_bonus_enabled = False
        self.current_gradient_accumulation_steps = 2
        self.max_completion_length = 8192
        self.args = SimpleNamespace(delta=None, steps_per_generation=2, use_bias_correction_kl=False)
        self.model = SimpleNamespace(training=True)
        # Metrics only: one process's view of the collectives.
        self.accelerator = SimpleNamespace(num_processes=world, gather=lambda t: t, reduce=lambda t, reduction: t)
        self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
        self.logps = None

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, **kw):
        return self.logps, torch.zeros_like(self.logps), None

    def __getattr__(self, name):
        return getattr(GRPOTrainer, name).__get__(self)


def trl_step_loss(step, world, log_ratios, seed, unit=False, layout={}):
    rng = np.random.default_rng(seed)
    total, parts = 0.0, []
    for rank in step.shard(world_size=world):
        if len(rank) == 0:
            continue
        inputs = trl(UnitAdvantage(rank) if unit else rank, dtype=torch.float64, **layout)
        recs = laid_out(rank, layout)
        width = inputs["completion_ids"].shape[1]
        lr = padded(response_ratios(log_ratios, recs), width)
        adv = inputs["advantages"].clone().requires_grad_(unit)
        me = _TrlSelf(world)
        for mb in micro_batches(len(recs), rng):
            idx = torch.as_tensor(mb)
            part = {k: (v[idx] if v.dim() else v) for k, v in inputs.items()}
            part["advantages"] = adv[idx]
            me.logps = part["old_per_token_logps"] + (0 if unit else lr[idx])
            total = total + GRPOTrainer._compute_loss(me, None, part) / world
        parts.append((adv, recs))
    return total, parts


@pytest.mark.parametrize("world", [1, 2])
def test_trl_dapo_keeps_the_contract(rows, world):
    for k, step in enumerate(rows.steps(executions=6)):
        lr = noise(step, 100 + k)
        got, _ = trl_step_loss(step, world, lr, k)
        assert float(got) == pytest.approx(contract_loss(step, lr), rel=1e-9, abs=1e-12)
        loss, parts = trl_step_loss(step, world, lr, k, unit=True)
        loss.backward()
        check_weights(step, unit_weights(parts))


def test_trl_inputs(rows):
    step = rows.steps(executions=4)[1]
    x = trl(step)
    for k, r in enumerate(laid_out(step, {})):
        p, n = r["prompt_len"], len(r["tokens"]) - r["prompt_len"]
        ids = torch.cat([x["prompt_ids"][k][x["prompt_mask"][k].bool()], x["completion_ids"][k][x["completion_mask"][k].bool()]])
        np.testing.assert_array_equal(ids.numpy(), r["tokens"].astype(np.int64))
        np.testing.assert_array_equal(x["tool_mask"][k][:n].numpy(), r["loss_mask"])
    assert float(x["num_items_in_batch"]) == step.targets


# --- SkyRL ------------------------------------------------------------------------------------

import skyrl as _skyrl  # noqa: E402

# skyrl.backends/__init__ imports the Tinker backend, whose pydantic models need Python 3.12;
# the training utilities under it do not. Load the package without its __init__.
_backends = types.ModuleType("skyrl.backends")
_backends.__path__ = [os.path.join(os.path.dirname(_skyrl.__file__), "backends")]
sys.modules.setdefault("skyrl.backends", _backends)

from skyrl.backends.skyrl_train.utils.ppo_utils import (  # noqa: E402
    apply_loss_reduction_to_advantages_minibatch,
    ppo_policy_loss,
)
from skyrl.train.config import AlgorithmConfig  # noqa: E402


def skyrl_step_loss(step, world, reduction, log_ratios, seed, unit=False, max_seq_len=None, layout={}):
    """SkyRL over one step (one mini-batch): the step's advantages from the gyre estimator,
    scaled by the reduction over the mini-batch, then the policy loss summed over each rank's
    micro-batches, times dp_size (SkyRL's sum correction), averaged over ranks (DDP)."""
    rng = np.random.default_rng(seed)
    out = skyrl(UnitAdvantage(step) if unit else step, loss_reduction=reduction, max_seq_len=max_seq_len, **layout)
    width = max((len(r) for r in out["response_ids"]), default=0)
    rewards = padded(out["rewards"], width)
    mask = padded(out["loss_masks"], width)
    old = padded(out["rollout_logprobs"], width)
    adv, _ = skyrl.advantage_estimator(token_level_rewards=rewards, response_mask=mask, index=None)
    adv = adv.clone().requires_grad_(unit)
    scaled = apply_loss_reduction_to_advantages_minibatch(
        advantages=adv, loss_mask=mask, loss_reduction=reduction, micro_batch_size=2, max_seq_len=max_seq_len or width
    )
    recs = laid_out(step, layout)
    lr = padded(response_ratios(log_ratios, recs), width)
    where = {(r["execution"], r["draw"]): k for k, r in enumerate(recs)}
    cfg = AlgorithmConfig(eps_clip_low=EPS_LOW, eps_clip_high=EPS_HIGH, loss_reduction=reduction)
    total = 0.0
    for rank in step.shard(world_size=world):
        rows_of_rank = np.array([where[(r["execution"], r["draw"])] for r in rank], dtype=np.int64)
        for mb in micro_batches(len(rows_of_rank), rng):
            if not len(mb):
                continue
            idx = torch.as_tensor(rows_of_rank[mb])
            loss, _ = ppo_policy_loss(old[idx] + (0 if unit else lr[idx]), old[idx], scaled[idx], cfg, loss_mask=mask[idx])
            # × dp_size (SkyRL's correction of the all-reduce mean to a sum), ÷ world (DDP mean).
            total = total + loss * world / world
    return total, [(adv, recs)]


@pytest.mark.parametrize("reduction", ["token_mean", "sequence_mean", "seq_mean_token_sum_norm"])
@pytest.mark.parametrize("world", [1, 3])
def test_skyrl_keeps_the_contract(rows, reduction, world):
    for k, step in enumerate(rows.steps(executions=6)):
        lr = noise(step, 200 + k)
        got, _ = skyrl_step_loss(step, world, reduction, lr, k, max_seq_len=20000)
        # SkyRL exponentiates the log-ratio in float32 (safe_exp_delta), whatever the dtype.
        assert float(got) == pytest.approx(contract_loss(step, lr), rel=1e-6, abs=1e-7)
        loss, parts = skyrl_step_loss(step, world, reduction, lr, k, unit=True, max_seq_len=20000)
        loss.backward()
        check_weights(step, unit_weights(parts), rel=1e-6)


def test_skyrl_refuses_reductions_that_cannot_keep_it(rows):
    step = rows.steps(executions=4)[0]
    for bad in ("token_mean_legacy", "prompt_mean"):
        with pytest.raises(ValueError, match="cannot keep"):
            skyrl(step, loss_reduction=bad)
    out = skyrl(step)
    assert [t["instance_id"] if isinstance(t, dict) else t.instance_id for t in out["trajectory_ids"]] == [
        gyre.trainers._common.uid(r) for r in step
    ]
    last = [r["execution"] for r, end in zip(step, out["is_last_step"]) if end]
    assert last == list(dict.fromkeys(r["execution"] for r in step))


# --- slime and prime-rl: their reductions as written (not on the package registry) -------------


def slime_step_loss(samples, log_ratios, world, rng):
    """slime at THUDM/slime 624b824a: `rollout_mask_sums` (slime/ray/rollout.py) is the loss-mask
    total of the step's samples with the sample's rollout_id; get_sum_of_sample_mean
    (backends/megatron_utils/cp_utils.py) sums each sample's masked loss over that denominator;
    loss.py scales by num_microbatches / step_global_batch_size × dp size, and Megatron averages
    over micro-batches and data-parallel ranks. Samples are dealt to ranks and micro-batches
    without regard to rollouts (first-fit packing may split one)."""
    totals = {}
    for s in samples:
        totals[s["rollout_id"]] = totals.get(s["rollout_id"], 0) + sum(s["loss_mask"])
    step_rollouts = len(totals)
    order = rng.permutation(len(samples))
    ranks = np.array_split(order, world)
    total = 0.0
    for rank in ranks:
        mbs = [m for m in np.array_split(rank, 2) if len(m)] or [rank]
        for mb in mbs:
            part = 0.0
            for k in mb:
                s = samples[k]
                ell = surrogate(s["metadata"]["gyre_advantage"], log_ratios[k])
                part += float(np.sum(ell * np.asarray(s["loss_mask"]))) / max(totals[s["rollout_id"]], 1)
            loss = part * len(mbs) / step_rollouts * world
            total += loss / len(mbs) / world
    return total


def test_slime_per_rollout_mean_keeps_the_contract(rows):
    for k, step in enumerate(rows.steps(executions=5)):
        lr = noise(step, 300 + k)
        samples = slime(step)
        recs = laid_out(step, {})
        by_row = response_ratios(lr, recs)
        assert [s["response_length"] for s in samples] == [len(r["loss_mask"]) for r in recs]
        assert len({s["rollout_id"] for s in samples}) == step.batch_executions
        raw, trained = slime.reward_post_process(None, samples)
        assert raw == [r["reward"] for r in recs] and trained == [r["advantage"] or 0.0 for r in recs]
        for world in (1, 2):
            got = slime_step_loss(samples, by_row, world, np.random.default_rng(k))
            assert got == pytest.approx(contract_loss(step, lr), rel=1e-9, abs=1e-12)


def prime_rl_step_loss(samples, log_ratios_full):
    """prime-rl at PrimeIntellect-ai/prime-rl 559b4477: src/prime_rl/trainer/rl/train.py counts
    rl_scale, the tokens with mask and a non-zero rl weight over every micro-batch and rank;
    loss.py compute_loss multiplies each token's loss by its rl weight, sums, divides by rl_scale;
    with rl_scale global, the sum over ranks and micro-batches is one sum over the step."""
    rl_scale = max(sum(int(np.sum(np.asarray(s["mask"]) & (np.asarray(s["rl_weights"]) != 0))) for s in samples), 1)
    total = 0.0
    for k, s in enumerate(samples):
        mask = np.asarray(s["mask"]) & (np.asarray(s["rl_weights"]) != 0)
        ell = np.zeros(len(mask))
        for t in np.nonzero(mask)[0]:
            ell[t] = surrogate(s["advantages"][t], log_ratios_full[k][t])
        total += float(np.sum(ell * np.asarray(s["rl_weights"]) * mask)) / rl_scale
    return total


def test_prime_rl_rl_weights_keep_the_contract(rows):
    for k, step in enumerate(rows.steps(executions=5)):
        lr = noise(step, 400 + k)
        # gyre synth records no sampling settings: the temperature is the caller's.
        samples = prime_rl(step, temperature=1.0)
        recs = laid_out(step, {})
        full = []
        for r, s in zip(recs, samples):
            full.append(lr[(r["execution"], r["draw"])][: len(r["tokens"])])
            assert s["token_ids"] == r["tokens"].tolist()
        assert prime_rl_step_loss(samples, full) == pytest.approx(contract_loss(step, lr), rel=1e-9, abs=1e-12)


def test_prime_rl_temperatures_are_the_recorded_ones_per_target():
    # prime-rl (559b4477, trainer/rl/train.py) divides each token's logits by its `temperatures`
    # entry before the log-softmax: a target's entry must be the temperature it was sampled at.
    # The first step holds same, mixed and unrecorded (the greedy execution is the next step's).
    step = gyre.load(TEMPERATURES).admit().steps(executions=3)[0]
    by_exec = {r["execution"]: (r, s) for r, s in zip(step, prime_rl(step, temperature=0.9))}
    assert sorted(by_exec) == ["mixed", "same", "unrecorded"]
    for e, (r, s) in by_exec.items():
        temps = np.asarray(s["temperatures"])
        assert len(temps) == len(s["token_ids"])
        for run in r["targets"]:
            want = run["temperature"] if run["temperature"] is not None else 0.9
            assert np.all(temps[run["pos"] : run["pos"] + run["len"]] == want), e
    r, s = by_exec["mixed"]
    assert [s["temperatures"][i] for i in np.nonzero(s["mask"])[0]] == [0.7, 0.7, 1.0]
    # A target with no recorded temperature falls back to the caller's.
    r, s = by_exec["unrecorded"]
    assert {s["temperatures"][i] for i in np.nonzero(s["mask"])[0]} == {0.9}


def test_prime_rl_refuses_an_unknown_or_greedy_temperature():
    rows = gyre.load(TEMPERATURES).admit()
    with pytest.raises(ValueError, match=r"'unrecorded', request 'r1': no sampling temperature"):
        prime_rl(rows)
    with pytest.raises(ValueError, match=r"'greedy', request 'r1': sampled at temperature 0.0"):
        prime_rl(rows, temperature=1.0)
    # The recorded temperature is the fact: the caller's only fills in where none was recorded.
    same = prime_rl(gyre.load(TEMPERATURES).admit().steps(executions=1)[0], temperature=2.0)[0]
    assert {same["temperatures"][i] for i in np.nonzero(same["mask"])[0]} == {0.7}


# --- layouts: an earlier prompt/response split, short dummies ---------------------------------

LAYOUTS = [{"split": "min_padding"}, {"split": 1, "dummy": "full"}, {"split": 40}, {"dummy": "full"}]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: ",".join(f"{k}={v}" for k, v in x.items()))
def test_layouts_keep_the_contract(rows, layout):
    for k, step in enumerate(rows.steps(executions=6)):
        lr = noise(step, 500 + k)
        for mode, world in (("token-mean", 3), ("seq-mean-token-mean", 1)):
            got, _ = verl_step_loss(step, world, mode, lr, k, layout=layout)
            assert float(got) == pytest.approx(contract_loss(step, lr, dual_clip=True), rel=1e-9, abs=1e-12)
        got, _ = trl_step_loss(step, 2, lr, k, layout=layout)
        assert float(got) == pytest.approx(contract_loss(step, lr), rel=1e-9, abs=1e-12)
        got, _ = skyrl_step_loss(step, 3, "sequence_mean", lr, k, layout=layout)
        assert float(got) == pytest.approx(contract_loss(step, lr), rel=1e-6, abs=1e-7)
        loss, parts = verl_step_loss(step, 3, "token-mean", lr, k, unit=True, layout=layout)
        loss.backward()
        check_weights(step, unit_weights(parts))


@pytest.mark.parametrize("split", ["first_target", "min_padding", 1, 40, 10**9])
def test_a_layout_moves_only_the_split_and_cuts_only_dummies(rows, split):
    plain = list(rows.iter(numpy=True))
    recs, coefficients = gyre.trainers.layout(rows, split=split)
    width = gyre.trainers._common.prompt_width(plain, split)
    assert len(recs) == len(plain) and len(coefficients) == len(plain)
    for r, c, old, old_c in zip(recs, coefficients, plain, rows.coefficients()):
        assert (r["execution"], r["draw"]) == (old["execution"], old["draw"])
        assert len(c) == len(r["loss_mask"]) == len(r["tokens"]) - r["prompt_len"] == len(r["logprobs"])
        if old["dummy"]:
            # One prompt token, one response token, no target: counted in B, no gradient.
            assert len(r["tokens"]) == min(2, len(old["tokens"])) and not r["loss_mask"].any() and not c.any()
            np.testing.assert_array_equal(r["tokens"], old["tokens"][:2])
            continue
        np.testing.assert_array_equal(r["tokens"], old["tokens"])
        want_p = old["prompt_len"] if width is None else min(old["prompt_len"], width)
        assert r["prompt_len"] == want_p
        moved = old["prompt_len"] - want_p
        # Everything moved into the response is a non-target with no coefficient and log-prob 0.
        assert not r["loss_mask"][:moved].any() and not c[:moved].any() and not r["logprobs"][:moved].any()
        np.testing.assert_array_equal(r["loss_mask"][moved:], old["loss_mask"])
        np.testing.assert_array_equal(c[moved:], old_c)
        np.testing.assert_array_equal(r["logprobs"][moved:], old["logprobs"])


def test_min_padding_is_the_fewest_padded_cells(rows):
    from gyre.trainers import _common

    for step in [rows, *rows.steps(executions=5)]:
        best = gyre.trainers.padding(step, split="min_padding")
        plain = list(step.iter(numpy=True))
        top = max(int(r["prompt_len"]) for r in plain)
        cells = {p: gyre.trainers.padding(step, split=p)["padded"] for p in range(1, top + 1)}
        assert best["padded"] == min(cells.values())
        # The largest such width: fewer response positions to compute log-probs for.
        assert best["prompt_width"] == max(p for p, c in cells.items() if c == best["padded"])
        assert best["padded"] <= gyre.trainers.padding(step)["padded"]
        assert best["real"] == gyre.trainers.padding(step)["real"] == sum(len(r["tokens"]) for r in _common.layout(plain, step.coefficients())[0])


def test_layouts_say_what_they_save(rows):
    full = gyre.trainers.padding(rows, dummy="full")
    short = gyre.trainers.padding(rows)
    best = gyre.trainers.padding(rows, split="min_padding")
    dummies = [r for r in rows.iter(numpy=True) if r["dummy"]]
    assert dummies, "the synth batch has dummy executions"
    assert full["dummy_tokens"] == sum(len(r["tokens"]) for r in dummies)
    assert short["dummy_tokens"] == sum(min(2, len(r["tokens"])) for r in dummies)
    assert short["real"] == full["real"] - full["dummy_tokens"] + short["dummy_tokens"]
    assert best["fill"] > short["fill"]


def test_layouts_refuse_what_they_cannot_do(rows):
    for bad, match in ((0, "at least 1"), (-3, "at least 1"), ("last_target", "must be one of"), (True, "must be one of"), (2.5, "must be one of")):
        with pytest.raises(ValueError, match=match):
            verl(rows, split=bad)
    with pytest.raises(ValueError, match="dummy must be one of short, full"):
        trl(rows, dummy="none")
