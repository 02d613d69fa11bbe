"""gyre.trainers.tree: tree packs give a causal LM the same target log-probs, step loss and parameter
gradient as flat rows (a Qwen3-architecture transformers model, random weights, fp32, CPU), over
`gyre synth` batches and real Claude Code imports at J_max 1, 5 and uncapped (a session with a
sub-agent, one with a compaction and a resumed session, and a 1,593-line one with both, whose
202,574-token tree goes through the model by blocks); the layout (every
target's path is its row's prefix, positions are offsets); the masks for SDPA, Hugging Face's 4-D
path and FlexAttention; the budget's split and its reported cost; bad input; and the reference loop
of docs/trainers.md, run as written."""

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers import AttentionInterface, Qwen3Config, Qwen3ForCausalLM

import gyre
from conftest import REPO, run_gyre
from gyre.trainers import tree

CLAUDE = REPO / "tests" / "fixtures" / "import" / "claude-code"


@pytest.fixture(scope="module")
def synth_path(tmp_path_factory):
    # One group of 4 with retries, divergences, compaction and 3 sub-agent calls; J_max 1, 5 and
    # uncapped admit 3,788, 33,526 and 52,331 row tokens (rows of up to 4,950).
    path = tmp_path_factory.mktemp("tree") / "synth.jsonl"
    run_gyre("synth", "--out", path, "--executions", "4", "--turns", "8", "--context", "400", "--seed", "3")
    return path


@pytest.fixture(scope="module")
def claude_paths(tmp_path_factory):
    """Real Claude Code sessions imported (one execution each, scored 1 and 0.5): the small
    ones share the harness's rendered system prompt; the 1,593-line one has a sub-agent, a
    compaction and rewinds."""
    d = tmp_path_factory.mktemp("claude")
    out = {}
    for name, score in [("short", "1"), ("tool_heavy", "0.5"), ("8463c716-a2ea-4c14-9efa-87158ebd9f20", "1")]:
        out[name] = d / f"{name}.jsonl"
        run_gyre("import", "claude-code", CLAUDE / f"{name}.jsonl", "--score", score, "--out", out[name])
    return out


def tiny_qwen3(vocab: int, attn: str = "sdpa", heads: int = 2) -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=heads,
        num_key_value_heads=1, head_dim=8, max_position_embeddings=1 << 17, tie_word_embeddings=False,
        attn_implementation=attn,
    )
    return Qwen3ForCausalLM(config).float().eval()


def token_loss(logp, adv, old):
    """A clipped-ratio surrogate plus an NLL term (never zero, even where advantages are)."""
    ratio = torch.exp(logp - old)
    return -torch.minimum(ratio * adv, ratio.clamp(0.8, 1.28) * adv) - logp


def flat_forward(model, recs, coefficients, ids):
    """Each row alone (causal, no mask): its targets' log-probs and the step loss."""
    logps, loss = {}, torch.zeros((), dtype=torch.float64)
    for k, (r, c) in enumerate(zip(recs, coefficients)):
        offsets = r["prompt_len"] + np.flatnonzero(r["loss_mask"])
        if not len(offsets):
            continue
        x = torch.as_tensor(ids(r["tokens"]))[None]
        logits = model(input_ids=x, logits_to_keep=torch.as_tensor(offsets - 1)).logits[0]
        lp = torch.log_softmax(logits.float(), -1).gather(-1, x[0, torch.as_tensor(offsets)][:, None])[:, 0]
        old = torch.zeros_like(lp) if r["logprobs"] is None else torch.as_tensor(r["logprobs"][offsets - r["prompt_len"]], dtype=lp.dtype)
        adv = torch.full_like(lp, float(r.get("advantage") or 0.0))
        coef = torch.as_tensor(c[offsets - r["prompt_len"]])
        loss = loss + (coef * token_loss(lp, adv, old).double()).sum()
        for o, v in zip(offsets, lp):
            logps[(k, int(o))] = v
    return logps, loss


def tree_forward(model, packs, ids):
    logps, loss = {}, torch.zeros((), dtype=torch.float64)
    blocks = model.config._attn_implementation == TreeBlocks.name
    for p in packs:
        TREE_BLOCKS.end = torch.as_tensor(p.subtree_end)
        logits = model(
            input_ids=torch.as_tensor(ids(p.input_ids))[None],
            position_ids=torch.as_tensor(p.position_ids)[None],
            attention_mask=None if blocks else p.torch_mask(),
            logits_to_keep=torch.as_tensor(p.target_pos),
        ).logits
        mapped = tree.TreePack(**dict(vars(p), target_ids=ids(p.target_ids)))
        lp = mapped.target_log_probs(logits, kept=True)
        old = torch.zeros_like(lp) if p.old_log_probs is None else torch.as_tensor(p.old_log_probs, dtype=lp.dtype)
        loss = loss + (torch.as_tensor(p.coefficients) * token_loss(lp, torch.as_tensor(p.advantages, dtype=lp.dtype), old).double()).sum()
        for k, o, v in zip(p.target_row, p.target_offset, lp):
            assert (int(k), int(o)) not in logps, "a target packed twice"
            logps[(int(k), int(o))] = v
    return logps, loss


def grads(model, loss):
    model.zero_grad()
    loss.backward()
    return torch.cat([q.grad.flatten() for q in model.parameters() if q.grad is not None])


def assert_exact(rows, max_tokens, attn="sdpa", vocab_cap=None, heads=2):
    recs = list(rows.iter(numpy=True))
    coefficients = rows.coefficients()
    # The model's vocabulary is the ids these rows use, renumbered (modulo `vocab_cap`, which
    # keeps a long session's logits small): the same map for both sides. The packs are laid out
    # from the real ids, so folding ids changes what the model reads, never the layout.
    vocab = np.unique(np.concatenate([r["tokens"] for r in recs]))
    cap = len(vocab) if vocab_cap is None else min(vocab_cap, len(vocab))
    ids = lambda t: (np.searchsorted(vocab, np.asarray(t)) % cap).astype(np.int64)  # noqa: E731
    model = tiny_qwen3(cap, attn, heads)
    packs = tree(rows, max_tokens=max_tokens)
    flat = tiny_qwen3(cap, heads=heads)  # the same weights (one seed), flat rows through causal SDPA
    flat_lp, flat_loss = flat_forward(flat, recs, coefficients, ids)
    tree_lp, tree_loss = tree_forward(model, packs, ids)
    assert tree_lp.keys() == flat_lp.keys() and flat_lp
    diff = max(abs(float(tree_lp[k]) - float(flat_lp[k])) for k in flat_lp)
    assert diff <= 1e-5, diff
    assert float(tree_loss) == pytest.approx(float(flat_loss), rel=1e-6, abs=1e-9)
    g_flat, g_tree = grads(flat, flat_loss), grads(model, tree_loss)
    rel = float((g_tree - g_flat).norm() / g_flat.norm())
    assert rel <= 1e-5, rel
    return packs


@pytest.mark.parametrize("jmax", [1, 5, 0])
def test_tree_packs_match_flat_rows_on_a_synth_batch(synth_path, jmax):
    rows = gyre.load(synth_path).admit(jmax=jmax)
    if jmax != 1:
        # One step of 2 executions (one with a sub-agent) keeps the CPU time modest: rows are
        # ~5k tokens each, and a dense mask costs T² per pack.
        rows = rows.steps(executions=2)[0]
    longest = max(len(r["tokens"]) for r in rows.iter(numpy=True))
    packs = assert_exact(rows, max_tokens=longest)
    assert packs.packed_tokens == packs.tree_tokens + packs.recomputed
    if jmax != 1:
        assert len(packs) > 1 and packs.recomputed > 0, "the budget cuts this tree"


@pytest.mark.parametrize("jmax", [1, 5, 0])
def test_tree_packs_match_flat_rows_on_claude_code_imports(claude_paths, jmax):
    rows = gyre.load([claude_paths["short"], claude_paths["tool_heavy"]]).admit(jmax=jmax)
    packs = assert_exact(rows, max_tokens=None)
    assert packs.tree_tokens < packs.row_tokens, "the two sessions share Claude Code's system prompt"


@pytest.mark.parametrize(
    "name, jmax, budget",
    [
        # A sub-agent (inline sidechains): 1, 3 and 3 rows of up to 6,541 tokens; a budget of
        # 8,192 splits the uncapped tree in two packs.
        ("dk-5c0375b4-57a5-4f26-b12d-d022ee4e51b7", 1, 8192),
        ("dk-5c0375b4-57a5-4f26-b12d-d022ee4e51b7", 5, 8192),
        ("dk-5c0375b4-57a5-4f26-b12d-d022ee4e51b7", 0, None),
        # A compaction, a `<synthetic>` message and a resumed session: 2 rows (20,138 and 2,562
        # tokens) sharing the system prompt; J_max 5 admits what uncapped does.
        ("entire-a6_e4c2a0fbd1_0", 5, None),
    ],
)
def test_tree_packs_match_flat_rows_on_real_sessions_with_a_subagent_and_a_compaction(tmp_path, name, jmax, budget):
    path = tmp_path / f"{name}.jsonl"
    run_gyre("import", "claude-code", REPO / "tests" / "fixtures" / "tree-pack" / f"{name}.jsonl", "--score", "1", "--out", path)
    rows = gyre.load(path).admit(jmax=jmax)
    packs = assert_exact(rows, max_tokens=budget)
    assert packs.tree_tokens <= packs.row_tokens


class TreeBlocks:
    """Tree attention for a pack too long for a ``[T, T]`` mask, as a transformers attention
    implementation (``attn_implementation="gyre_tree_blocks"``): the queries go in blocks; a
    block's keys are the ancestors of its first token (the keys ``k < q0`` with
    ``subtree_end[k] > q0``) and the block itself, masked by the pack's rule
    ``k <= q < subtree_end[k]``, and each block is recomputed in the backward pass rather than
    kept. The same attention as ``attention_mask()``, at the memory of one block."""

    name = "gyre_tree_blocks"
    end: torch.Tensor
    size = 1024

    def __call__(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        groups = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
        end, n, out = self.end, query.shape[2], []
        for q0 in range(0, n, self.size):
            q1 = min(q0 + self.size, n)
            keys = torch.cat([torch.nonzero(end[:q0] > q0)[:, 0], torch.arange(q0, q1)])
            out.append(checkpoint(self.block, query[:, :, q0:q1], key, value, keys, q0, q1, scaling, use_reentrant=False))
        return torch.cat(out, 2).transpose(1, 2).contiguous(), None

    def block(self, query, key, value, keys, q0, q1, scaling):
        q = torch.arange(q0, q1)[:, None]
        if self.end[q0] >= q1:
            # The block lies in its first token's subtree, so that token's ancestors are every
            # query's: only the block's own keys need the rule's comparisons.
            ancestors = len(keys) - (q1 - q0)
            inner = keys[None, ancestors:]
            allowed = torch.cat(
                [torch.ones(q1 - q0, ancestors, dtype=torch.bool), (inner <= q) & (q < self.end[inner])], 1
            )
        else:
            allowed = (keys[None, :] <= q) & (q < self.end[keys][None, :])
        return F.scaled_dot_product_attention(query, key[:, :, keys], value[:, :, keys], attn_mask=allowed, scale=scaling)


TREE_BLOCKS = TreeBlocks()
AttentionInterface.register(TreeBlocks.name, TREE_BLOCKS)


@pytest.mark.parametrize("jmax", [1, 0])
def test_tree_packs_match_flat_rows_on_a_large_real_session(claude_paths, jmax):
    # Claude Code's sub-agent and compaction in one session (rows of 10,830 to 112,881 tokens,
    # 202,574 tree tokens) with the two small sessions sharing its system prompt: computed through
    # the pack's tree by blocks (TreeBlocks), on a one-head model to keep the CPU time in bounds.
    rows = gyre.load([claude_paths[n] for n in ("8463c716-a2ea-4c14-9efa-87158ebd9f20", "short", "tool_heavy")]).admit(jmax=jmax)
    recs = list(rows.iter(numpy=True))
    packs = assert_exact(rows, max_tokens=None, attn=TreeBlocks.name, vocab_cap=1024, heads=1)
    assert_layout(recs, packs)
    assert packs.token_ratio >= gyre_prefix_repeat(recs) * 0.95
    assert packs.tree_tokens < packs.row_tokens


def test_j_max_5_admits_the_uncapped_rows_of_the_large_real_session(claude_paths):
    # Its executions have at most 3 candidate paths (main, main-summary, sub), so J_max 5 draws
    # every one, as uncapped does: the model-level check at uncapped is the check at 5.
    batch = gyre.load([claude_paths[n] for n in ("8463c716-a2ea-4c14-9efa-87158ebd9f20", "short", "tool_heavy")])
    five, uncapped = batch.admit(jmax=5), batch.admit(jmax=0)
    a, b = list(five.iter(numpy=True)), list(uncapped.iter(numpy=True))
    assert len(a) == len(b) == 5
    for x, y in zip(a, b):
        assert np.array_equal(x["tokens"], y["tokens"]) and np.array_equal(x["loss_mask"], y["loss_mask"])
    assert all(np.array_equal(x, y) for x, y in zip(five.coefficients(), uncapped.coefficients()))


def gyre_prefix_repeat(recs):
    from gyre.trainers.packing import _repeat

    return _repeat([r["tokens"] for r in recs if r["loss_mask"].any()])


def assert_layout(recs, packs):
    seen = set()
    for p in packs:
        assert (p.parent < np.arange(len(p))).all(), "every token after its parent"
        depth = np.zeros(len(p), dtype=np.int64)
        for i, q in enumerate(p.parent):
            depth[i] = 0 if q < 0 else depth[q] + 1
        assert (depth == p.position_ids).all()
        # subtree_end (what the attention reads) is one past the last descendant, from the parents.
        end = np.arange(1, len(p) + 1)
        for i in range(len(p) - 1, 0, -1):
            if p.parent[i] >= 0:
                end[p.parent[i]] = max(end[p.parent[i]], end[i])
        assert np.array_equal(end, p.subtree_end)
        for k, o, pos, t in zip(p.target_row, p.target_offset, p.target_pos, p.target_ids):
            r = recs[k]
            assert p.input_ids[pos] == r["tokens"][o - 1] and p.position_ids[pos] == o - 1 and t == r["tokens"][o]
            seen.add((int(k), int(o)))
        # The path of the deepest target of each row is the row's prefix (ancestors, in order).
        for k in set(p.target_row.tolist()):
            last = p.target_pos[p.target_row == k].max()
            path = []
            while last >= 0:
                path.append(p.input_ids[last])
                last = p.parent[last]
            assert np.array_equal(path[::-1], recs[k]["tokens"][: len(path)])
    want = {(k, int(o)) for k, r in enumerate(recs) for o in r["prompt_len"] + np.flatnonzero(r["loss_mask"])}
    assert seen == want


def test_the_token_ratio_reaches_the_prefix_repeat(synth_path):
    rows = gyre.load(synth_path).admit(jmax=0)
    recs = list(rows.iter(numpy=True))
    whole = tree(rows)
    assert len(whole) == 1 and whole.recomputed == 0
    assert whole.token_ratio >= gyre_prefix_repeat(recs) * 0.95
    assert whole.tree_tokens == len(whole[0])
    assert_layout(recs, whole)
    # Under a budget the ratio falls by exactly the recomputed prefixes.
    cut = tree(rows, max_tokens=max(len(r["tokens"]) for r in recs))
    assert cut.row_tokens / (cut.tree_tokens + cut.recomputed) == pytest.approx(cut.token_ratio)
    assert cut.tree_tokens == whole.tree_tokens and len(cut) > 1
    assert_layout(recs, cut)


def test_masks_agree_across_sdpa_eager_and_flex_attention(tmp_path):
    write_small_run(tmp_path / "run.jsonl")
    p = tree(gyre.load(tmp_path / "run.jsonl").admit(jmax=0))[0]
    m = p.attention_mask()
    # The mask is "self or ancestor", built here from the parents.
    n = len(p)
    anc = np.zeros((n, n), dtype=bool)
    for i in range(n):
        if p.parent[i] >= 0:
            anc[i] = anc[p.parent[i]]
        anc[i, i] = True
    assert np.array_equal(m, anc)
    assert not np.array_equal(m, np.tril(np.ones((n, n), dtype=bool))), "the tree branches"
    x = torch.as_tensor(p.input_ids)[None]
    pos = torch.as_tensor(p.position_ids)[None]
    sdpa = tiny_qwen3(512, "sdpa")(input_ids=x, position_ids=pos, attention_mask=p.torch_mask()).logits
    eager = tiny_qwen3(512, "eager")(input_ids=x, position_ids=pos, attention_mask=p.torch_mask(dtype=torch.float32)).logits
    assert float((sdpa - eager).abs().max()) <= 1e-5
    TREE_BLOCKS.end, TREE_BLOCKS.size = torch.as_tensor(p.subtree_end), 16
    try:
        blocks = tiny_qwen3(512, TreeBlocks.name)(input_ids=x, position_ids=pos).logits
    finally:
        TREE_BLOCKS.size = 1024
    assert float((sdpa - blocks).abs().max()) <= 1e-5
    # FlexAttention runs its reference (uncompiled) path on CPU: the same attention, from a
    # BlockMask whose blocks follow the tree.
    from torch.nn.attention.flex_attention import flex_attention

    block = p.block_mask(device="cpu", block_size=16)
    q, k, v = torch.randn(3, 1, 2, n, 8).unbind(0)
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=p.torch_mask())
    flex = flex_attention(q, k, v, block_mask=block)
    assert float((dense - flex).abs().max()) <= 1e-5
    # Blocks no token attends across are skipped: fewer than a causal mask's.
    blocks = -(-n // 16)
    kept = int(block.kv_num_blocks.sum()) + int(block.full_kv_num_blocks.sum())
    assert kept < blocks * (blocks + 1) // 2


def test_bad_input_is_a_clear_error(synth_path):
    rows = gyre.load(synth_path).admit(jmax=5)
    longest = max(len(r["tokens"]) for r in rows.iter(numpy=True))
    with pytest.raises(ValueError, match=r"more than max_tokens=\d+.*execution"):
        tree(rows, max_tokens=longest - 1)
    steps = rows.steps(executions=2)
    with pytest.raises(ValueError, match="rows of two steps"):
        tree(steps, max_tokens=None)
    with pytest.raises(ValueError, match="an empty step"):
        tree([], max_tokens=None)
    with pytest.raises(ValueError, match="positive"):
        tree(rows, max_tokens=0)
    # Shards of one step together are that step.
    shards = steps[0].shard(world_size=2)
    both = tree(shards, max_tokens=None)
    assert both.tree_tokens == tree(steps[0]).tree_tokens
    with pytest.raises(ValueError, match="given twice"):
        tree([shards[0], shards[0]])


def write_small_run(path):
    """A recording with small token ids (a model with a 512-token vocabulary reads it): one group
    of 4 executions, 3 turns each, every turn extending the last, a retry in two of them."""
    rng = np.random.default_rng(0)
    system = rng.integers(1, 512, 40).tolist()
    with gyre.Recorder(str(path)) as rec:
        for e in range(4):
            x = f"x{e}"
            rec.execution(x, group="g", t=0.0, budget_s=60.0)
            context, t = list(system), 1.0
            for turn in range(3):
                context += rng.integers(1, 512, 6).tolist()
                if e % 2 and turn == 1:  # a retry: the same input sampled again
                    out = rng.integers(1, 512, 5).tolist()
                    rec.request(x, f"r{turn}a", input=context, output=out, logprobs=[-1.0] * 5, t=t)
                    t += 1
                out = rng.integers(1, 512, 8).tolist()
                rec.request(x, f"r{turn}", input=context, output=out, logprobs=[-1.5] * 8, t=t)
                context, t = context + out, t + 1
            rec.closure(x, t=t, status="completed", artifact="patch", version=1)
            rec.assessment(x, artifact="patch", version=1, status="valid", score=float(e % 3), t=t + 1)


def test_the_reference_loop_in_docs_trainers_runs(tmp_path, monkeypatch):
    doc = (REPO / "docs" / "trainers.md").read_text()
    section = doc[doc.index("## Tree packs") :]
    code = re.search(r"```python model\n(.*?)```", section, re.S).group(1)
    lines = code.strip().splitlines()
    assert 15 <= len(lines) <= 25, len(lines)
    monkeypatch.chdir(tmp_path)
    write_small_run(tmp_path / "run.jsonl")
    model = tiny_qwen3(512)
    before = [q.detach().clone() for q in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    exec(compile(code, "docs/trainers.md", "exec"), {"model": model, "optimizer": optimizer})
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters())), "the loop trained"
