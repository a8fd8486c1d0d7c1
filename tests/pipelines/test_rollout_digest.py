"""A real rollout records, in every trajectory row, the digest of the checkpoint it sampled from;
the trainer takes those rows from that checkpoint and refuses them from any other."""

import pytest

from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import IterationSpec, run_rollout
from flywheel.schemas import SCHEMA_VERSION
from flywheel.policy.checkpoint import policy_digest, save_checkpoint
from flywheel.policy.backends import create_policy
from flywheel.trainer.train import StalePolicyError, train_iteration

from tests.run_configs import tiny_config


def test_rows_carry_the_digest_of_the_checkpoint_they_were_sampled_from(tmp_path):
    config = tiny_config(domains=("add",), tasks_per_domain=3, heldout_per_domain=1, n_samples=4)
    options = config.policy.parsed_options()
    sampled = create_policy(config.policy.backend, options, seed=11)
    digest = save_checkpoint(str(tmp_path / "ck0"), sampled, None, {"policy_version": 0})
    other = create_policy(config.policy.backend, options, seed=12)
    other_digest = save_checkpoint(str(tmp_path / "ck-other"), other, None, {"policy_version": 0})
    fresh = policy_digest(create_policy(config.policy.backend, options, seed=config.seed))
    assert len({digest, other_digest, fresh}) == 3

    layout = RunLayout(str(tmp_path / "run"))
    run_rollout(config, IterationSpec("digest", 0, policy_version=0,
                                      checkpoint_uri=str(tmp_path / "ck0")),
                layout, PipelineOptions([]))
    rows = layout.read_table("trajectories").to_pylist()
    assert len(rows) == 3 * 4
    assert {r["checkpoint_digest"] for r in rows} == {digest}
    assert {r["schema_version"] for r in rows} == {SCHEMA_VERSION}

    trajectories = layout.table_dir("trajectories", 0)
    refused = rf"12 of 12 .*{other_digest}.*12 row\(s\) from {digest}"
    with pytest.raises(StalePolicyError, match=refused):
        train_iteration(trajectories, str(tmp_path / "ck-other"), str(tmp_path / "ck1"),
                        config.train, seed=0)
    stats = train_iteration(trajectories, str(tmp_path / "ck0"), str(tmp_path / "ck1"),
                            config.train, seed=0)
    assert stats["n_sequences"] >= 0  # trained from the checkpoint the rows name: accepted


def test_a_rollout_without_a_checkpoint_records_the_fresh_policys_digest(tmp_path):
    config = tiny_config(domains=("add",), tasks_per_domain=2, heldout_per_domain=1, n_samples=2)
    layout = RunLayout(str(tmp_path))
    run_rollout(config, IterationSpec("fresh", 0, policy_version=0, checkpoint_uri=None), layout,
                PipelineOptions([]))
    fresh = create_policy(config.policy.backend, config.policy.parsed_options(), seed=config.seed)
    rows = layout.read_table("trajectories").to_pylist()
    assert rows and {r["checkpoint_digest"] for r in rows} == {policy_digest(fresh)}
    # saved, it is the checkpoint whose digest the rows name
    assert save_checkpoint(str(tmp_path / "ck"), fresh, None, {}) == policy_digest(fresh)


@pytest.mark.slow
def test_each_iteration_records_the_checkpoint_the_trainer_wrote_before_it(tmp_path):
    from flywheel.loop.driver import run_iterations
    from flywheel.reports.sql import query
    from flywheel.policy.checkpoint import load_checkpoint
    config = tiny_config(domains=("add",), tasks_per_domain=3, heldout_per_domain=1, n_samples=4)
    run_iterations(str(tmp_path), config)
    layout = RunLayout(str(tmp_path))
    _, rows = query(str(tmp_path), "SELECT iteration, checkpoint_digest, count(*) "
                                   "FROM trajectories GROUP BY 1, 2 ORDER BY 1")
    sampled_from = [load_checkpoint(layout.checkpoint(k)).digest for k in (None, 0)]
    assert rows == [(0, sampled_from[0], 12), (1, sampled_from[1], 12)]
