"""Per-domain advantage scaling: the arithmetic by hand, the running statistics, the Beam transform
on real attempts, and that the trainer's tokens carry the scaled advantages."""

import math

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import BeamAssertException, assert_that, equal_to

from flywheel.records.attempt import Attempt
from flywheel.schemas import rows_to_file_table
from flywheel.schemas.read import table_dataset
from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.trajectory_batches import make_batch
from flywheel.trainer.trajectory_stream import StreamedRows
from flywheel.transforms.domain_scale import (DomainStats, ScaleByDomain, carries_signal,
                                              domain_scales, mean_square, prior_from_metrics,
                                              scaled)
from flywheel.transforms.filters import apply_filters
from flywheel.transforms.rewards import normalize_group

DR_GRPO = Algorithm(advantage="dr_grpo", domain_scale="running")
IDS = dict(run_id="r", iteration=1, policy_version=1)


def attempt(domain, task, i, reward, **extra):
    extra = {"verdict": "pass" if reward > 0 else "fail", "prompt_token_ids": [1, 2],
             "response_token_ids": [3, 4], "response_logprobs": [-1.0, -1.0], **extra}
    return Attempt("r", 1, 1, "train", domain, task, f"{domain}/{task}", i, "p", {}, 1.0, 4, 0,
                   reward_raw=reward, **extra)


def episode(domain, task, i, outcome, scores):
    """An episode of len(scores) turns, two response tokens each (the action's, then the
    observation's), whose turns scored `scores`."""
    turns = [{"action": f"a{k}", "action_start": 2 * k, "action_end": 2 * k + 1, "reward": s}
             for k, s in enumerate(scores)]
    n = 2 * len(scores)
    return attempt(domain, task, i, outcome, turns=turns, episode_end="submitted",
                   prompt_token_ids=[1, 2], response_token_ids=[3] * n,
                   response_logprobs=[-1.0] * n,
                   response_mask=[1, 0] * len(scores))


def groups(domain, n_groups, scale, algorithm=DR_GRPO):
    """n_groups groups of four attempts at `domain`, rewards 0, 0, 1, 1 times `scale`, normalized
    and filtered as the rollout does."""
    out = []
    for g in range(n_groups):
        group = [attempt(domain, f"t{g}", i, scale * (i >= 2)) for i in range(4)]
        out += [apply_filters(a) for a in normalize_group(group, algorithm)]
    return out


def mass(attempts, domain):
    return sum(abs(a.advantage) for a in attempts if a.domain == domain and not a.filtered)


def scale_in_memory(attempts, algorithm=DR_GRPO, prior=None, shares=None):
    """What ScaleByDomain does, without Beam: (scaled attempts, domain_scales' answer)."""
    sums = {}
    for a in attempts:
        if carries_signal(a, algorithm.credit):
            n, total = sums.get(a.domain, (0, 0.0))
            sums[a.domain] = (n + 1, total + mean_square(a, algorithm.credit))
    stats = {d: DomainStats(n, math.sqrt(t / n)) for d, (n, t) in sums.items()}
    scales = domain_scales(stats, prior, algorithm.domain_momentum, shares)
    return [scaled(a, scales[a.domain].scale) if carries_signal(a, algorithm.credit) else a
            for a in attempts], scales


def test_the_arithmetic_by_hand():
    """base: 10 rows at rms 0.5 (mass 5); many: 100 rows (mass 50); loud: rms 5 (mass 50).
    Scales 1 / (n rms) = 0.2, 0.02, 0.02, times 120 / (10 * 0.2 + 100 * 0.02 + 10 * 0.02)."""
    stats = {"base": DomainStats(10, 0.5), "many": DomainStats(100, 0.5),
             "loud": DomainStats(10, 5.0)}
    out = domain_scales(stats)
    c = 120 / 4.2
    assert {d: s.scale for d, s in out.items()} == pytest.approx(
        {"base": 0.2 * c, "many": 0.02 * c, "loud": 0.02 * c})
    assert {d: s.running for d, s in out.items()} == stats  # no prior: the running ones are its own
    assert sum(stats[d].signal_count * s.scale for d, s in out.items()) == pytest.approx(120)
    masses = [stats[d].signal_count * stats[d].adv_rms * s.scale for d, s in out.items()]
    assert masses == pytest.approx([masses[0]] * 3)


def test_a_domain_with_ten_times_the_groups_or_the_reward_scale_weighs_the_same():
    attempts = groups("base", 1, 1.0) + groups("many", 10, 1.0) + groups("loud", 1, 10.0)
    assert mass(attempts, "many") == pytest.approx(10 * mass(attempts, "base"))
    assert mass(attempts, "loud") == pytest.approx(10 * mass(attempts, "base"))
    out, scales = scale_in_memory(attempts)
    assert [mass(out, d) for d in ("many", "loud")] == pytest.approx([mass(out, "base")] * 2)
    trained = [a for a in attempts if carries_signal(a, DR_GRPO.credit)]
    assert len(trained) == 48  # the mean scale over the rows with signal is 1
    assert sum(scales[a.domain].scale for a in trained) == pytest.approx(len(trained))


def test_target_shares_set_the_masses():
    attempts = groups("base", 1, 1.0) + groups("many", 10, 1.0)
    out, _ = scale_in_memory(attempts, shares={"base": 0.75, "many": 0.25})
    assert mass(out, "base") == pytest.approx(3 * mass(out, "many"))
    # a domain the shares do not name takes the mean of those named
    out, _ = scale_in_memory(attempts + groups("loud", 1, 10.0),
                             shares={"base": 0.75, "many": 0.25})
    assert mass(out, "loud") == pytest.approx(2 * mass(out, "many"))


def test_the_running_statistics_are_an_ema_across_iterations():
    first = domain_scales({"a": DomainStats(10, 1.0), "b": DomainStats(10, 2.0)}, momentum=0.9)
    prior = {d: s.running for d, s in first.items()}
    second = domain_scales({"a": DomainStats(20, 3.0), "b": DomainStats(10, 2.0)}, prior, 0.9)
    assert second["a"].running == pytest.approx(DomainStats(0.9 * 10 + 0.1 * 20, 0.9 * 1 + 0.1 * 3))
    assert second["b"].running == pytest.approx(DomainStats(10, 2.0))
    assert second["a"].adv_rms == 3.0
    # this iteration's a holds 20 rows at rms 3 but its running mass is 11 * 1.2, b's 20: a is
    # scaled by 1 / 13.2 and b by 1 / 20 before the common factor
    ratio = second["a"].scale / second["b"].scale
    assert ratio == pytest.approx(20 / (11 * 1.2))
    # a domain new in the second iteration starts from its own statistics
    third = domain_scales({"c": DomainStats(5, 1.0)}, prior, 0.9)
    assert third["c"].running == DomainStats(5, 1.0) and third["c"].scale == pytest.approx(1.0)


def test_prior_from_metrics_reads_the_latest_running_rows():
    def row(iteration, domain, name, value):
        return {"run_id": "r", "iteration": iteration, "domain": domain, "name": name,
                "value": value, "policy_version": iteration, "created_at": None}
    rows = [row(0, "a", "norm/adv_rms_running", 9.0), row(1, "a", "norm/adv_rms_running", 0.5),
            row(1, "a", "norm/signal_count_running", 12.0), row(1, "a", "norm/scale", 3.0),
            row(1, "b", "norm/adv_rms_running", 2.0),  # no count: no prior
            row(1, "*", "norm/adv_rms_running", 1.0), row(1, "a", "train_pass_rate", 0.5)]
    assert prior_from_metrics(rows) == {"a": DomainStats(12.0, 0.5)}
    assert prior_from_metrics([]) == {}


def test_unknown_domain_scale_or_momentum_is_refused():
    with pytest.raises(ValueError, match="none, running"):
        Algorithm(domain_scale="per_domain").check()
    with pytest.raises(ValueError, match="momentum"):
        Algorithm(domain_momentum=1.0).check()
    with pytest.raises(ValueError, match="negative"):
        ScaleByDomain(DR_GRPO, **IDS, shares={"a": -1.0})


def mixed_attempts(algorithm):
    """A single-turn domain (10 groups, one zero-variance, an errored attempt) and an episode
    domain at 10x the reward scale, normalized and filtered."""
    attempts = groups("math", 9, 1.0, algorithm) + groups("flat", 1, 0.0, algorithm)
    attempts = [a.replace(domain="math") for a in attempts]
    broken = [attempt("math", "e", 0, 1.0), attempt("math", "e", 1, 0.0),
              attempt("math", "e", 2, 0.0, verdict="error", failure="environment")]
    attempts += [apply_filters(a) for a in normalize_group(broken, algorithm)]
    repo = [episode("repo", "r", 0, 10.0, [5.0, 10.0]), episode("repo", "r", 1, 0.0, [0.0]),
            episode("repo", "r", 2, 10.0, [10.0]), episode("repo", "r", 3, 0.0, [0.0, 0.0, 0.0])]
    return attempts + [apply_filters(a) for a in normalize_group(repo, algorithm)]


def key(a):
    return (a.group_id, a.sample_index)


def matches(expected):
    """A matcher: the same attempts, advantages and turn advantages equal up to float rounding."""
    def check(actual):
        got = {key(a): a for a in actual}
        if set(got) != {key(a) for a in expected}:
            raise BeamAssertException(f"attempts differ: {sorted(got)}")
        for e in expected:
            a = got[key(e)]
            turns = [t.get("advantage") for t in a.turns]
            if (a.advantage != pytest.approx(e.advantage, abs=1e-12) or a.replace(
                    advantage=e.advantage, turns=e.turns) != e
                    or turns != pytest.approx([t.get("advantage") for t in e.turns], abs=1e-12)):
                raise BeamAssertException(f"{key(e)}: {a.advantage}, {turns} != {e.advantage}")
    return check


@pytest.mark.parametrize("credit", ["outcome", "turn"])
def test_scale_by_domain_on_the_direct_runner(credit):
    algorithm = Algorithm(advantage="dr_grpo", credit=credit, domain_scale="running")
    attempts = mixed_attempts(algorithm)
    prior = {"math": DomainStats(30.0, 0.4)}
    expected, scales = scale_in_memory(attempts, algorithm, prior)
    assert {a.filter_reason for a in attempts} >= {"zero_variance", "environment_error", None}
    untouched = [a for a in attempts if not carries_signal(a, credit)]
    assert untouched and all(a in expected for a in untouched)
    repo = [a for a in expected if a.domain == "repo"]
    assert any(t["advantage"] for a in repo for t in a.turns)
    assert scales["repo"].scale != pytest.approx(1.0) and scales["math"].scale != pytest.approx(1.0)
    with TestPipeline() as p:
        out = (p | beam.Create(attempts)
               | ScaleByDomain(algorithm, **IDS, prior=prior))
        assert_that(out["attempts"], matches(expected), label="Attempts")
        rows = out["metrics"] | beam.Map(lambda r: (r["run_id"], r["iteration"], r["domain"],
                                                    r["name"], round(r["value"], 9),
                                                    r["policy_version"]))
        want = [("r", 1, d, name, round(v, 9), 1) for d, s in scales.items()
                for name, v in [("norm/adv_rms", s.adv_rms), ("norm/scale", s.scale),
                                ("norm/adv_rms_running", s.running.adv_rms),
                                ("norm/signal_count_running", s.running.signal_count)]]
        assert_that(rows, equal_to(want), label="Metrics")
    # the rows carry the next iteration's prior
    metric_rows = [{"domain": d, "name": n, "value": v, "iteration": 1}
                   for _, _, d, n, v, _ in want]
    assert prior_from_metrics(metric_rows) == {
        d: DomainStats(*(round(x, 9) for x in s.running)) for d, s in scales.items()}


def test_domain_scale_none_leaves_the_attempts_as_they_are():
    algorithm = Algorithm(advantage="dr_grpo", credit="turn")
    attempts = mixed_attempts(algorithm)
    with TestPipeline() as p:
        out = p | beam.Create(attempts) | ScaleByDomain(algorithm, **IDS,
                                                        prior={"math": DomainStats(30.0, 0.4)})
        assert_that(out["attempts"], equal_to(attempts), label="Attempts")
        assert_that(out["metrics"], equal_to([]), label="Metrics")


def test_the_trainer_trains_on_the_scaled_advantages(tmp_path):
    """The scaled attempts written as the rollout writes them and read as train_iteration reads
    them (StreamedRows, then make_batch): each action token carries its turn's scaled advantage."""
    algorithm = Algorithm(advantage="dr_grpo", credit="turn", domain_scale="running")
    attempts = mixed_attempts(algorithm)
    scaled_attempts, scales = scale_in_memory(attempts, algorithm)
    assert scales["repo"].scale != pytest.approx(scales["math"].scale)
    folder = tmp_path / "iteration=1" / "domain=all"
    folder.mkdir(parents=True)
    pq.write_table(rows_to_file_table("trajectories", [a.row() for a in scaled_attempts]),
                   folder / "part-0.parquet")
    rows = StreamedRows(table_dataset(str(tmp_path / "iteration=1"), "trajectories"),
                        credit="turn")
    [minibatch] = rows.minibatches(np.arange(rows.n_sequences), 64)  # in table order
    trained = [a for a in attempts if carries_signal(a, "turn")]
    assert len(minibatch) == len(trained) > 0
    assert sum(bool(a.turns) for a in trained) >= 2
    for row, original in zip(minibatch, trained):
        s = scales[original.domain].scale
        advantages = make_batch([row], pad_id=0, credit="turn")["advantages"][0]
        for turn, unscaled in zip(row["turns"], original.turns):
            position = 1 + turn["action_start"]  # a prompt of 2 tokens: position p-1+t predicts t
            assert advantages[position].item() == pytest.approx(s * unscaled["advantage"])
        assert row["advantage"] == pytest.approx(s * original.advantage)
        if not original.turns:  # every response token carries the row's
            assert advantages[1:3].tolist() == pytest.approx([s * original.advantage] * 2)
