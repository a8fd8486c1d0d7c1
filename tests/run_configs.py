"""Small run configurations that exercise every stage in seconds (the `tiny` fixture of
tests/conftest.py gives `tiny_config`)."""

from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig, WarmStartSettings
from flywheel.trainer.train_step import TrainConfig


def tiny_config(**rollout) -> RunConfig:
    return RunConfig(
        seed=3, iterations=2,
        rollout=RolloutSettings(**{"tasks_per_domain": 4, "heldout_per_domain": 4, "n_samples": 4,
                                   **rollout}),
        warm_start=WarmStartSettings(max_steps=20, eval_every=20, eval_tasks=4, batch_size=32),
        train=TrainConfig(minibatch_size=32, epochs=1),
        policy=PolicySpec())
