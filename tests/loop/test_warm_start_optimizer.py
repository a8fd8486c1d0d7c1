"""The warm start's Adam state carried into RL (`warm_start.carry_optimizer`): the initial
checkpoint holds it, the first RL update continues it, and so moves the weights far less than a
fresh Adam, whose first step moves every weight by about the learning rate."""

import pytest
import torch

from flywheel.settings.config import RunConfig
from flywheel.loop.driver import run_iterations
from flywheel.settings.layout import RunLayout
from flywheel.policy.checkpoint import load_checkpoint

from tests.run_configs import tiny_config

pytestmark = pytest.mark.slow


def first_update(run_dir: str) -> tuple[float, dict | None, dict]:
    """(mean |weight change| of iteration 0 over the lr, the initial optimizer state, iteration
    0's train stats)."""
    layout = RunLayout(run_dir)
    initial = load_checkpoint(layout.checkpoint(None), torch.device("cpu"))
    after = load_checkpoint(layout.checkpoint(0), torch.device("cpu"))
    before = dict(initial.policy.module.named_parameters())
    deltas = [(p - before[n]).abs().mean().item() for n, p in after.policy.module.named_parameters()]
    return sum(deltas) / len(deltas), initial.optimizer_state, after.meta["train_stats"]


def test_the_first_rl_update_continues_the_warm_starts_adam(tmp_path):
    moved = {}
    for carry in (True, False):
        # interval learns within 200 steps: half the groups then carry signal
        base = tiny_config(domains=("interval",), tasks_per_domain=16, n_samples=8).to_dict()
        warm = {**base["warm_start"], "max_steps": 200, "eval_every": 200, "carry_optimizer": carry}
        config = RunConfig.from_dict({**base, "iterations": 1, "warm_start": warm})
        run = str(tmp_path / str(carry))
        run_iterations(run, config)
        change, state, stats = first_update(run)
        assert stats["n_steps"] >= 1
        moved[carry] = change / config.train.lr / stats["n_steps"]
        if carry:
            steps = {int(s["step"]) for s in state["state"].values()}
            assert steps == {config.warm_start.max_steps}  # Adam's moments after the warm start
        else:
            assert state is None
    # a fresh Adam moves each weight by about lr per step; the carried one by much less
    print("first RL update, mean |dw| / lr / step:", moved)
    assert moved[False] > 0.3 and moved[True] < 0.6 * moved[False], moved
