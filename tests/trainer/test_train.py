import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from flywheel.trainer.advantages import get_advantage
from flywheel.trainer.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.model import PolicyConfig, build_policy
from flywheel.trainer.sampling import sample
from flywheel.trainer.tokens import decode, encode_answer, encode_prompt
from flywheel.trainer.train import train_iteration
from flywheel.trainer.train_step import TrainConfig, build_optimizer, supervised_step, train_on_rows
from flywheel.trainer.trajectory_batches import make_batch, read_trajectories

SCHEMA = pa.schema([
    ("task_id", pa.string()),
    ("prompt_token_ids", pa.list_(pa.int32())),
    ("response_token_ids", pa.list_(pa.int32())),
    ("response_logprobs", pa.list_(pa.float32())),
    ("advantage", pa.float64()),
    ("sampling_temperature", pa.float32()),
    ("filtered", pa.bool_()),
])  # fmt: skip


def _rollout(model, n_tasks=8, group=4, seed=0):
    """Real samples, rewarded for emitting a digit first, with GRPO advantages per group."""
    prompts = [encode_prompt(f"{i}+{i}=") for i in range(n_tasks) for _ in range(group)]
    out = sample(model, prompts, [1.0] * len(prompts), [seed * 1000 + i for i in range(len(prompts))], 8)
    rewards = np.array([float(bool(s.token_ids) and 48 <= s.token_ids[0] <= 57) for s in out])
    rewards[::3] = 1.0  # make sure most groups carry signal
    adv = np.concatenate([get_advantage("grpo")(g) for g in rewards.reshape(n_tasks, group)])
    return [
        {"task_id": str(i // group), "prompt_token_ids": p, "response_token_ids": s.token_ids,
         "response_logprobs": s.logprobs, "advantage": float(a), "sampling_temperature": 1.0,
         "filtered": i % 7 == 0}
        for i, (p, s, a) in enumerate(zip(prompts, out, adv))
    ]  # fmt: skip


def test_train_iteration_changes_the_weights(tmp_path):
    model = build_policy(PolicyConfig(), 0).eval()
    rows = _rollout(model)
    folder = tmp_path / "tables" / "trajectories" / "iteration=0"
    (folder / "domain=x").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), folder / "domain=x" / "part-0.parquet")
    table = read_trajectories(str(folder))
    assert table.column("iteration").to_pylist() == [0] * len(rows)
    assert set(table.column("domain").to_pylist()) == {"x"}

    save_checkpoint(str(tmp_path / "ck0"), model, None, {"policy_version": 0})
    cfg = TrainConfig(minibatch_size=8)
    stats = train_iteration(str(folder), str(tmp_path / "ck0"), str(tmp_path / "ck1"), cfg, seed=0)
    kept = [r for r in rows if not r["filtered"] and r["advantage"] != 0]
    assert stats["n_sequences"] == len(kept) > 0
    assert stats["n_steps"] == cfg.epochs * -(-len(kept) // cfg.minibatch_size)
    assert np.isfinite(stats["loss"]) and stats["grad_norm"] > 0
    assert stats["clip_frac"] == 0.0 or stats["n_steps"] > 1  # first step is exactly on-policy

    new = load_checkpoint(str(tmp_path / "ck1"))
    assert new.meta["policy_version"] == 1 and new.meta["train_stats"] == stats
    assert new.optimizer_state is not None
    for (name, a), b in zip(model.state_dict().items(), new.model.state_dict().values()):
        assert not torch.equal(a, b), f"{name} did not move"

    # The next iteration resumes the optimizer, but with its own lr.
    train_iteration(str(folder), str(tmp_path / "ck1"), str(tmp_path / "ck2"), TrainConfig(lr=1e-5), seed=1)
    resumed = load_checkpoint(str(tmp_path / "ck2"))
    assert resumed.optimizer_state["param_groups"][0]["lr"] == 1e-5
    assert resumed.meta["policy_version"] == 2


def test_no_signal_means_no_step():
    model = build_policy(PolicyConfig(), 0)
    rows = [dict(r, advantage=0.0) for r in _rollout(model, n_tasks=2)]
    before = [p.clone() for p in model.parameters()]
    stats = train_on_rows(model, build_optimizer(model, TrainConfig()), rows, TrainConfig(), 0)
    assert stats["n_steps"] == 0 and stats["n_sequences"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_make_batch_aligns_response_with_targets():
    rows = [
        {"prompt_token_ids": [256, 1, 2], "response_token_ids": [3, 257], "response_logprobs": [-0.5, -0.25],
         "advantage": 1.0, "sampling_temperature": 0.7},
        {"prompt_token_ids": [256], "response_token_ids": [9], "response_logprobs": [-1.0],
         "advantage": -1.0, "sampling_temperature": 0.0},
    ]  # fmt: skip
    b = make_batch(rows)
    assert b["input_ids"].tolist() == [[256, 1, 2, 3, 257], [256, 9, 258, 258, 258]]
    assert b["response_mask"].tolist() == [[0, 0, 1, 1], [1, 0, 0, 0]]
    assert b["old_logprobs"].tolist() == [[0, 0, -0.5, -0.25], [-1.0, 0, 0, 0]]
    assert b["attn_mask"].sum(1).tolist() == [5, 2]


def test_supervised_warm_start_learns_reversal():
    torch.manual_seed(0)
    pairs = [(a + b, b + a) for a, b in itertools.product("abcde", repeat=2)]
    prompts = [encode_prompt(f"rev:{p}=") for p, _ in pairs]
    answers = [encode_answer(a) for _, a in pairs]
    model = build_policy(PolicyConfig(), 0)
    opt = build_optimizer(model, TrainConfig(lr=3e-3))
    losses = [supervised_step(model, opt, prompts, answers) for _ in range(200)]
    assert losses[-1] < 0.1 * losses[0]
    out = sample(model.eval(), prompts, [0.0] * len(prompts), list(range(len(prompts))), 8)
    assert [decode(s.token_ids) for s in out] == [a for _, a in pairs]
