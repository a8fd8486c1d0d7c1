"""The train step with every registered loss, the KL to a frozen reference, and its metrics."""
import copy

import numpy as np
import pytest
import torch

from flywheel.trainer.aggregation import AGGREGATIONS
from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.credit import ADVANTAGES
from flywheel.trainer.losses import LOSSES
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.trainer.train_step import TrainConfig, train_on_rows
from flywheel.policy.rollout_engine import engine_for

OPTIONS = {"d_model": 32, "n_layers": 2, "context": 24}


def _rollout(policy, n_tasks=4, group=4):
    """Real samples rewarded for an even first byte, with GRPO advantages per group."""
    policy.module.eval()
    prompts = [policy.encode_prompt(f"{i}+{i}=") for i in range(n_tasks) for _ in range(group)]
    out = engine_for(policy, local=True).sample(prompts, [1.0] * len(prompts), list(range(len(prompts))), max_new_tokens=6)
    rewards = np.array([float(s.token_ids[0] % 2 == 0) for s in out])
    adv = np.concatenate([ADVANTAGES.get("grpo")(g) for g in rewards.reshape(n_tasks, group)])
    return [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                 advantage=float(a) if a else 0.5, sampling_temperature=1.0, filtered=False)
            for p, s, a in zip(prompts, out, adv)]


@pytest.mark.parametrize("loss", ["grpo", "dapo", "dr_grpo", "gspo"])
def test_every_loss_trains_and_reports_its_metrics(loss):
    policy = create_policy("tiny", OPTIONS, seed=0)
    rows = _rollout(policy)
    before = copy.deepcopy(policy.module.state_dict())
    cfg = TrainConfig(minibatch_size=8, lr=1e-3)
    stats = train_on_rows(policy, build_optimizer(policy, **cfg.adamw()), rows, cfg, seed=0,
                          algorithm=Algorithm(loss=loss))
    assert stats["n_steps"] == 4 and np.isfinite(stats["loss"])
    assert stats["grad_norm"] > 0 and 0 <= stats["clip_frac"] <= 1 and stats["entropy"] > 0
    assert "kl" not in stats  # no reference, no KL term
    # The sampler (float64, rounded to float32) and the trainer score the same ids alike.
    assert stats["logprob_diff_max"] < 1e-4
    moved = [n for n, p in policy.module.state_dict().items() if not torch.equal(p, before[n])]
    assert moved, f"{loss}: an optimizer step left every weight as it was"


def test_kl_to_a_frozen_reference_is_added_and_reported():
    policy = create_policy("tiny", OPTIONS, seed=0)
    reference = create_policy("tiny", OPTIONS, seed=0)
    reference.module.eval().requires_grad_(False)
    rows = _rollout(policy)
    cfg = TrainConfig(minibatch_size=16, epochs=3, lr=3e-3, kl_coef=0.5, kl_estimator="k3")
    stats = train_on_rows(policy, build_optimizer(policy, **cfg.adamw()), rows, cfg, seed=0,
                          reference=reference)
    # Step 1 starts at the reference (KL 0); later steps have moved away from it.
    assert stats["kl"] > 0
    assert stats["loss"] == pytest.approx(stats["pg_loss"] + 0.5 * stats["kl"], rel=1e-5)
    ref_weights = create_policy("tiny", OPTIONS, seed=0).module.state_dict()
    assert all(torch.equal(p, ref_weights[n]) for n, p in reference.module.state_dict().items())
    with pytest.raises(ValueError, match="reference"):
        train_on_rows(policy, build_optimizer(policy, **cfg.adamw()), rows, cfg, seed=0)


def test_the_config_overrides_only_what_it_sets():
    rows = [{"response_token_ids": [1, 2, 3]}, {"response_token_ids": [4]}]
    assert TrainConfig().loss_overrides(rows) == {"norm_length": 3}
    assert TrainConfig(clip_high=0.3, norm_length=64).loss_overrides(rows) == {
        "clip_high": 0.3, "norm_length": 64}
    assert "gspo" in LOSSES and "seq-mean-token-sum-norm" in AGGREGATIONS
    # The aggregation is the algorithm's choice, else the loss's own; its unit follows from it.
    assert Algorithm(loss="dapo").loss_aggregation() == "token-mean"
    assert Algorithm(loss="dr_grpo").loss_aggregation() == "seq-mean-token-sum-norm"
    assert Algorithm(loss="grpo").loss_unit() == "sequence"
    assert Algorithm(loss="grpo", aggregation="token-mean").loss_unit() == "token"


def test_train_iteration_loads_the_reference_only_for_a_kl_term(tmp_path):
    import pyarrow.parquet as pq

    from flywheel.schemas import rows_to_file_table
    from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
    from flywheel.trainer.train import train_iteration

    policy = create_policy("tiny", OPTIONS, seed=0)
    folder = tmp_path / "trajectories" / "iteration=0" / "domain=x"
    folder.mkdir(parents=True)
    rows = [dict(r, task_id="t") for r in _rollout(policy)]
    pq.write_table(rows_to_file_table("trajectories", rows), folder / "part-0.parquet")
    save_checkpoint(str(tmp_path / "ck0"), policy, None, {"policy_version": 0})
    cfg, dapo = TrainConfig(minibatch_size=8, kl_coef=0.1), Algorithm(loss="dapo")
    with pytest.raises(ValueError, match="reference"):
        train_iteration(str(folder.parent), str(tmp_path / "ck0"), str(tmp_path / "ck1"), cfg, 0,
                        algorithm=dapo)
    stats = train_iteration(str(folder.parent), str(tmp_path / "ck0"), str(tmp_path / "ck1"), cfg,
                            0, reference_checkpoint_uri=str(tmp_path / "ck0"), algorithm=dapo)
    assert stats["kl"] > 0
    assert load_checkpoint(str(tmp_path / "ck1")).meta["algorithm"]["loss"] == "dapo"


@pytest.mark.parametrize("loss, aggregation", [
    ("grpo", None), ("dapo", None), ("dr_grpo", None), ("gspo", None),
    ("grpo", "token-mean"), ("grpo", "seq-mean-token-sum"), ("dapo", "seq-mean-token-sum-norm")])
def test_microbatches_accumulate_the_whole_minibatchs_gradient(loss, aggregation):
    """A token budget that splits the minibatch row by row changes nothing but peak memory,
    whichever aggregation: each microbatch's loss is weighted by its share of the units the
    aggregation averages over (derived from the aggregation, not kept per loss)."""
    from flywheel.trainer.update_loop import microbatches

    base = create_policy("tiny", OPTIONS, seed=0)
    rows = _rollout(base)
    assert [len(m) for m in microbatches(rows, 1)] == [1] * len(rows)
    longest = max(len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for r in rows)
    assert len(microbatches(rows, 4 * longest)) <= len(rows) // 4 + 1
    results = []
    for micro_tokens in (0, 1):
        policy = copy.deepcopy(base)
        reference = copy.deepcopy(base)
        reference.module.eval().requires_grad_(False)
        cfg = TrainConfig(epochs=1, minibatch_size=len(rows), lr=1e-2,
                          micro_tokens=micro_tokens, kl_coef=0.1)
        opt = torch.optim.SGD(policy.module.parameters(), lr=1e-2)
        policy.module.train()
        stats = train_on_rows(policy, opt, rows, cfg, seed=0, reference=reference,
                              algorithm=Algorithm(loss=loss, aggregation=aggregation))
        results.append((stats, policy.module.state_dict()))
    (whole, w_weights), (split, s_weights) = results
    assert split["grad_norm"] == pytest.approx(whole["grad_norm"], rel=1e-4)
    assert split["pg_loss"] == pytest.approx(whole["pg_loss"], rel=1e-4, abs=1e-6)
    for name, p in w_weights.items():
        torch.testing.assert_close(s_weights[name], p, atol=1e-6, rtol=1e-5)
