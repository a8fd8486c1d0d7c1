"""Small run configurations that exercise every stage in seconds."""

import pytest

from flywheel.pipelines.config import PolicySpec, RolloutSettings, RunConfig, WarmStartSettings
from flywheel.trainer.train_step import TrainConfig


def tiny_config(**rollout) -> RunConfig:
    return RunConfig(
        seed=3, iterations=2,
        rollout=RolloutSettings(**{"tasks_per_domain": 4, "heldout_per_domain": 4, "n_samples": 4,
                                   **rollout}),
        warm_start=WarmStartSettings(max_steps=20, eval_every=20, eval_tasks=4, batch_size=32),
        train=TrainConfig(minibatch_size=32, epochs=1),
        policy=PolicySpec())


@pytest.fixture
def tiny():
    return tiny_config


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium over the DevTools protocol (chromium.py)."""
    from .chromium import open_browser
    yield from open_browser(tmp_path)
