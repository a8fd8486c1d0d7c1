"""The episode state a live attempt carries between turns: typed, frozen, changed only by
`replace`, and encoded by the attempt's Beam coder deterministically, through a real pipeline."""

import dataclasses

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.episodes import EpisodeState
from flywheel.domains.registry import get_domain
from flywheel.transforms.attempt_coder import AttemptCoder
from flywheel.transforms.expand import expand_task
from flywheel.transforms.turn import start_episode, with_sample


def started(domain: str = "shell_pick", samples: int = 1):
    task = get_domain(domain).make_task("train", 0, seed=0)
    attempts = expand_task(task, run_id="r", iteration=0, policy_version=0, seed=0,
                           n_samples=samples, temperature=1.0, mode="train")
    return [start_episode(a, EpisodeSettings(max_turns=3, tokens=40, observation_chars=300))
            for a in attempts]


def test_the_state_is_typed_frozen_and_changed_by_replace():
    attempt, = started()
    episode = attempt.episode
    assert isinstance(episode, EpisodeState) and (episode.turn, episode.max_turns) == (0, 3)
    assert episode.end is None and "token_budget" not in episode.keys()  # the run's, not the episode's
    assert episode.tools[0]["name"] == "run_shell" and episode.state["files"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        episode.turn = 1
    later = episode.replace(turn=1, observation="a\nb\n")
    assert (later.turn, later.observation, episode.turn, episode.observation) == (1, "a\nb\n", 0, None)
    assert later.state is episode.state  # the rest is shared, not copied


def test_a_mapping_from_the_sampler_becomes_the_state_again():
    attempt, = started()
    as_mapping = {**dict(attempt.episode), "end": "budget"}  # what the turn sampler hands back
    back = with_sample(attempt, {"episode": as_mapping, "response": "ls"})
    assert back.episode == attempt.episode.replace(end="budget") and back.response == "ls"
    assert attempt.episode["turn"] == 0 and attempt.episode.get("max_turns") == 3
    with pytest.raises(KeyError):
        attempt.episode["nothing"]


def test_the_coder_round_trips_the_state_deterministically():
    coder = AttemptCoder()
    attempt, = started()
    assert coder.decode(coder.encode(attempt)) == attempt
    state = attempt.episode.state
    reordered = attempt.episode.replace(state={"answer": state["answer"],  # other key orders
                                               "files": dict(reversed(state["files"].items()))})
    assert list(reordered.state) != list(state) and reordered == attempt.episode
    assert coder.encode(attempt.replace(episode=reordered)) == coder.encode(attempt)
    ended = attempt.replace(episode=None)
    assert coder.decode(coder.encode(ended)).episode is None


def test_live_episodes_cross_a_group_by_key_intact():
    attempts = started(samples=3)
    attempts[1] = attempts[1].replace(episode=attempts[1].episode.replace(turn=2, observation="x"))
    with TestPipeline() as p:
        grouped = (p | beam.Create(attempts) | beam.Map(lambda a: (a.group_id, a))
                   | beam.GroupByKey()
                   | beam.FlatMap(lambda kv: sorted(kv[1], key=lambda a: a.sample_index)))
        assert_that(grouped, equal_to(attempts))
        assert_that(grouped | beam.Map(lambda a: type(a.episode).__name__),
                    equal_to(["EpisodeState"] * 3), label="typed")
