"""Per-turn credit through the trainer, on real samples of the tiny policy: a group whose outcomes
tie but whose turns do not is trained on under turn credit, by the in-memory and the streamed
trainer alike, and skipped under outcome credit."""
import copy

import pyarrow.parquet as pq
import torch

from flywheel.schemas import rows_to_file_table
from flywheel.trainer.algorithm import Algorithm
from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.credit import assign_credit
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.trainer.train import train_iteration
from flywheel.trainer.train_step import RowsInMemory, TrainConfig, train_on_rows
from flywheel.policy.rollout_engine import engine_for

OPTIONS = {"d_model": 32, "n_layers": 2, "context": 24}
TURN = Algorithm(credit="turn")


def _tied_episodes(policy, n_groups=4):
    """Groups of two sampled two-turn episodes, both solved (the outcomes tie), one of them half
    right after its first turn: action tokens 0-2, an observation at 3 (not the policy's), action
    tokens 4-5. Advantages as the rollout assigns them under turn credit."""
    policy.module.eval()
    prompts = [policy.encode_prompt(f"{g}+{g}=") for g in range(n_groups) for _ in range(2)]
    samples = engine_for(policy, local=True).sample(prompts, [1.0] * len(prompts), list(range(len(prompts))), 6)
    rows = []
    for g in range(n_groups):
        pair = samples[2 * g: 2 * g + 2]
        advantages, per_turn = assign_credit([1.0, 1.0], [[0.5, 1.0], [0.0, 1.0]], "grpo",
                                             "turn", 1.0)
        for k, (s, adv, turns) in enumerate(zip(pair, advantages, per_turn)):
            ids = list(s.token_ids) + [0] * (6 - len(s.token_ids))
            rows.append(dict(
                task_id=str(g), prompt_token_ids=prompts[2 * g + k], response_token_ids=ids,
                response_logprobs=list(s.logprobs) + [0.0] * (6 - len(s.logprobs)),
                response_mask=[1, 1, 1, 0, 1, 1], advantage=float(adv), filtered=False,
                sampling_temperature=1.0, episode_end="solved",
                turns=[{"action_start": 0, "action_end": 3, "advantage": float(turns[0])},
                       {"action_start": 4, "action_end": 6, "advantage": float(turns[1])}]))
    return rows


def test_turn_credit_trains_on_a_tied_group_that_outcome_credit_skips():
    base = create_policy("tiny", OPTIONS, seed=0)
    rows = _tied_episodes(base)
    assert all(r["advantage"] == 0 for r in rows) and any(t["advantage"] for r in rows for t in r["turns"])
    cfg = TrainConfig(minibatch_size=4, epochs=1, lr=1e-2)
    results = {}
    for algorithm in (Algorithm(), TURN):
        policy = copy.deepcopy(base)
        stats = train_on_rows(policy, build_optimizer(policy, **cfg.adamw()), rows, cfg, seed=0,
                              algorithm=algorithm)
        moved = any(not torch.equal(p, q) for p, q in zip(policy.module.parameters(),
                                                          base.module.parameters()))
        results[algorithm.credit] = (stats["n_sequences"], stats["n_steps"], moved)
    assert results["outcome"] == (0, 0, False)
    assert results["turn"] == (len(rows), 2, True)


def test_the_streamed_trainer_selects_and_trains_as_the_in_memory_one(tmp_path):
    policy = create_policy("tiny", OPTIONS, seed=0)
    rows = _tied_episodes(policy)
    folder = tmp_path / "trajectories" / "iteration=0" / "domain=x"
    folder.mkdir(parents=True)
    pq.write_table(rows_to_file_table("trajectories", rows), folder / "part-0.parquet")
    save_checkpoint(str(tmp_path / "ck0"), policy, None, {"policy_version": 0})
    cfg = TrainConfig(minibatch_size=4, epochs=2)
    in_memory = load_checkpoint(str(tmp_path / "ck0")).policy
    expected = train_on_rows(in_memory, build_optimizer(in_memory, **cfg.adamw()), rows, cfg,
                             seed=3, algorithm=TURN)
    stats = train_iteration(str(folder.parent), str(tmp_path / "ck0"), str(tmp_path / "ck1"), cfg,
                            seed=3, algorithm=TURN)
    assert stats == expected and stats["n_sequences"] == len(rows) == RowsInMemory(rows, "turn").n_sequences
    meta = load_checkpoint(str(tmp_path / "ck1")).meta
    assert meta["algorithm"]["credit"] == "turn"
    trained = load_checkpoint(str(tmp_path / "ck1")).policy.module.state_dict()
    for name, value in in_memory.module.state_dict().items():
        assert torch.equal(trained[name], value), name
    skipped = train_iteration(str(folder.parent), str(tmp_path / "ck0"), str(tmp_path / "ck2"),
                              cfg, seed=3)
    assert skipped["n_sequences"] == 0
