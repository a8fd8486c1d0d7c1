import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from flywheel.schemas import SchemaVersionError, read_table, rows_to_file_table
from flywheel.trainer.credit import ADVANTAGES
from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.trainer.train import train_iteration
from flywheel.trainer.supervised import supervised_step
from flywheel.trainer.train_step import TrainConfig, train_on_rows
from flywheel.trainer.trajectory_batches import make_batch
from flywheel.policy.rollout_engine import engine_for

SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("prompt_token_ids", pa.list_(pa.int32())),
        ("response_token_ids", pa.list_(pa.int32())),
        ("response_logprobs", pa.list_(pa.float32())),
        ("advantage", pa.float64()),
        ("sampling_temperature", pa.float32()),
        ("filtered", pa.bool_()),
    ]
)


def _policy(seed=0):
    return create_policy("tiny", {}, seed)


def _optimizer(policy, cfg):
    return build_optimizer(policy, **cfg.adamw())


def _rollout(policy, n_tasks=8, group=4, seed=0):
    """Real samples, rewarded for starting with an even byte, with GRPO advantages per group."""
    prompts = [policy.encode_prompt(f"{i}+{i}=") for i in range(n_tasks) for _ in range(group)]
    seeds = [seed * 1000 + i for i in range(len(prompts))]
    out = engine_for(policy, local=True).sample(prompts, [1.0] * len(prompts), seeds, max_new_tokens=8)
    rewards = np.array([float(s.token_ids[0] % 2 == 0) for s in out])
    adv = np.concatenate([ADVANTAGES.get("grpo")(g) for g in rewards.reshape(n_tasks, group)])
    return [
        dict(task_id=str(i // group), prompt_token_ids=p, response_token_ids=s.token_ids,
             response_logprobs=s.logprobs, advantage=float(a), sampling_temperature=1.0, filtered=i % 7 == 0)
        for i, (p, s, a) in enumerate(zip(prompts, out, adv))
    ]


def _write(folder, rows, flywheel_format=False):
    """A Parquet file as the rollout writes it (schemas' file schema), or with bare training columns."""
    folder.mkdir(parents=True, exist_ok=True)
    if flywheel_format:
        table = rows_to_file_table("trajectories", rows)
    else:
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
    pq.write_table(table, folder / f"part-{len(list(folder.iterdir()))}.parquet")


def test_train_iteration_changes_the_weights(tmp_path):
    policy = _policy()
    policy.module.eval()
    rows = _rollout(policy)
    folder = tmp_path / "tables" / "trajectories" / "iteration=0"
    _write(folder / "domain=x", rows, flywheel_format=True)
    save_checkpoint(str(tmp_path / "ck0"), policy, None, {"policy_version": 0})

    cfg = TrainConfig(minibatch_size=8)
    stats = train_iteration(str(folder), str(tmp_path / "ck0"), str(tmp_path / "ck1"), cfg, seed=0)
    kept = [r for r in rows if not r["filtered"] and r["advantage"] != 0]
    assert stats["n_sequences"] == len(kept) > 0
    assert stats["n_tokens"] == sum(len(r["response_token_ids"]) for r in kept)
    assert stats["n_steps"] == cfg.epochs * -(-len(kept) // cfg.minibatch_size)
    assert np.isfinite(stats["loss"]) and stats["grad_norm"] > 0

    new = load_checkpoint(str(tmp_path / "ck1"))
    assert new.meta["policy_version"] == 1 and new.meta["train_stats"] == stats
    assert new.optimizer_state is not None
    for (name, a), b in zip(policy.module.state_dict().items(), new.policy.module.state_dict().values()):
        assert torch.isfinite(b).all() and not torch.equal(a, b), f"{name} did not move"

    # The next iteration resumes Adam's state, but with its own lr.
    train_iteration(str(folder), str(tmp_path / "ck1"), str(tmp_path / "ck2"), TrainConfig(lr=1e-5), seed=1)
    resumed = load_checkpoint(str(tmp_path / "ck2"))
    assert resumed.optimizer_state["param_groups"][0]["lr"] == 1e-5
    assert resumed.meta["policy_version"] == 2


def test_the_trainer_rejects_an_unknown_major_version(tmp_path):
    policy = _policy()
    save_checkpoint(str(tmp_path / "ck0"), policy, None, {"policy_version": 0})
    rows = _rollout(policy, n_tasks=1)
    folder = tmp_path / "iteration=0"
    _write(folder / "domain=x", rows, flywheel_format=True)
    assert read_table(str(folder), "trajectories").column("schema_version")[0].as_py().startswith("1.")
    _write(folder / "domain=y", [dict(r, schema_version="9.0") for r in rows], flywheel_format=True)
    with pytest.raises(SchemaVersionError, match="9.0"):
        train_iteration(str(folder), str(tmp_path / "ck0"), str(tmp_path / "ck1"), TrainConfig(), seed=0)


def test_advantage_sign_moves_logprobs():
    policy = _policy()
    policy.module.eval()
    rows = [r for r in _rollout(policy, n_tasks=16, group=8) if r["advantage"] != 0]
    b = make_batch(rows, policy.pad_id)

    def seq_logprob():
        with torch.no_grad():
            lp = policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"])
        return (lp * b["response_mask"]).sum(1)

    before = seq_logprob()
    train_on_rows(policy, _optimizer(policy, TrainConfig(lr=1e-3)), rows, TrainConfig(), seed=0)
    change = seq_logprob() - before
    pos = b["advantages"][:, 0] > 0  # outcome credit: every token carries its row's
    assert change[pos].mean() > 0 > change[~pos].mean()


def test_no_signal_means_no_step():
    policy = _policy()
    rows = [dict(r, advantage=0.0) for r in _rollout(policy, n_tasks=2)]
    before = [p.clone() for p in policy.module.parameters()]
    stats = train_on_rows(policy, _optimizer(policy, TrainConfig()), rows, TrainConfig(), 0)
    assert stats["n_steps"] == 0 and stats["n_sequences"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, policy.module.parameters()))


def test_training_works_even_with_grad_switched_off_globally():
    policy = _policy()
    opt = _optimizer(policy, TrainConfig())
    with torch.no_grad():  # e.g. a sampler's setup() that ran earlier in the same process
        loss = supervised_step(policy, opt, [policy.encode_prompt("ab")], [policy.encode_response("ba")])
        stats = train_on_rows(policy, opt, _rollout(policy, n_tasks=2), TrainConfig(), 0)
    assert np.isfinite(loss) and stats["n_steps"] > 0


def test_non_finite_advantage_is_refused():
    policy = _policy()
    rows = [dict(r, advantage=float("nan")) for r in _rollout(policy, n_tasks=1)]
    with pytest.raises(ValueError, match="non-finite"):
        train_on_rows(policy, _optimizer(policy, TrainConfig()), rows, TrainConfig(), 0)


def test_make_batch_aligns_response_with_targets():
    rows = [
        dict(prompt_token_ids=[256, 1, 2], response_token_ids=[3, 257], response_logprobs=[-0.5, -0.25],
             advantage=1.0, sampling_temperature=0.7),
        dict(prompt_token_ids=[256], response_token_ids=[9], response_logprobs=[-1.0],
             advantage=-1.0, sampling_temperature=0.0),
    ]
    b = make_batch(rows, pad_id=258)
    assert b["input_ids"].tolist() == [[256, 1, 2, 3, 257], [256, 9, 258, 258, 258]]
    assert b["response_mask"].tolist() == [[0, 0, 1, 1], [1, 0, 0, 0]]
    assert b["old_logprobs"].tolist() == [[0, 0, -0.5, -0.25], [-1.0, 0, 0, 0]]
    assert b["attn_mask"].sum(1).tolist() == [5, 2]
    assert b["advantages"].tolist() == [[1.0] * 4, [-1.0] * 4]  # per token, one row's each


def test_supervised_warm_start_learns_reversal():
    torch.manual_seed(0)
    pairs = [(a + b, b + a) for a, b in itertools.product("abcde", repeat=2)]
    policy = _policy()
    prompts = [policy.encode_prompt(f"rev:{p}=") for p, _ in pairs]
    answers = [policy.encode_response(a) for _, a in pairs]
    opt = _optimizer(policy, TrainConfig(lr=3e-3))
    losses = [supervised_step(policy, opt, prompts, answers) for _ in range(200)]
    assert losses[-1] < 0.1 * losses[0]
    policy.module.eval()
    out = engine_for(policy, local=True).sample(prompts, [0.0] * len(prompts), list(range(len(prompts))), 8)
    assert [policy.decode(s.token_ids) for s in out] == [a for _, a in pairs]


def _two_partitions(tmp_path, policy):
    """An iteration's table in two files (domain=a, domain=b): filtered, zero-advantage and
    signal rows mixed, as the rollout writes them."""
    rows = _rollout(policy, n_tasks=8, group=4) + _rollout(policy, n_tasks=4, group=4, seed=1)
    folder = tmp_path / "tables" / "trajectories" / "iteration=0"
    _write(folder / "domain=a", rows[:20], flywheel_format=True)
    _write(folder / "domain=b", rows[20:], flywheel_format=True)
    return folder


def test_streamed_rows_draw_the_minibatches_rows_in_memory_draw(tmp_path):
    from flywheel.schemas.read import table_dataset
    from flywheel.trainer.train_step import RowsInMemory
    from flywheel.trainer.trajectory_batches import TRAIN_COLUMNS
    from flywheel.trainer.trajectory_stream import StreamedRows

    folder = _two_partitions(tmp_path, _policy())
    in_memory = RowsInMemory(read_table(str(folder), "trajectories", columns=TRAIN_COLUMNS).to_pylist())
    order = np.random.default_rng(0).permutation(in_memory.n_sequences)
    expected = list(in_memory.minibatches(order, 4))
    for window, batch_size in [(8, 5), (12, 1024), (10_000, 3)]:  # many windows; one, kept
        streamed = StreamedRows(table_dataset(str(folder), "trajectories"), window, batch_size)
        for name in ("n_sequences", "n_tokens", "longest_response", "n_non_finite"):
            assert getattr(streamed, name) == getattr(in_memory, name), name
        assert streamed.n_rows == 48 and 0 < streamed.n_sequences < 48
        for _ in range(2):  # a second epoch reads again (or reuses the one window)
            assert list(streamed.minibatches(order, 4)) == expected


def test_the_streamed_trainer_trains_the_weights_the_in_memory_trainer_did(tmp_path):
    """train_iteration (streamed, windows smaller than the iteration) and the former in-memory
    read (all rows to_pylist, then train_on_rows) give the same stats and the same weights."""
    from flywheel.trainer.trajectory_batches import TRAIN_COLUMNS

    policy = _policy()
    policy.module.eval()
    folder = _two_partitions(tmp_path, policy)
    save_checkpoint(str(tmp_path / "ck0"), policy, None, {"policy_version": 0})
    cfg = TrainConfig(minibatch_size=4, epochs=2)

    rows = read_table(str(folder), "trajectories", columns=TRAIN_COLUMNS).to_pylist()
    in_memory = load_checkpoint(str(tmp_path / "ck0")).policy
    expected = train_on_rows(in_memory, _optimizer(in_memory, cfg), rows, cfg, seed=7)
    for window in (8, 10_000):
        out = tmp_path / f"ck-{window}"
        stats = train_iteration(str(folder), str(tmp_path / "ck0"), str(out), cfg, seed=7,
                                window_rows=window)
        assert stats == expected and expected["n_sequences"] > 2 * 8  # three windows of 8 or more
        trained = load_checkpoint(str(out)).policy.module.state_dict()
        for name, value in in_memory.module.state_dict().items():
            assert torch.equal(trained[name], value), name
