"""Episodes: multi-turn attempts through `stages` unrolled Turn stages, then ended and ready to score.

    attempts -> StartEpisodes -> Turn1 -> Turn2 -> ... -> TurnK -> EndEpisodes -> attempts
                                   \\done     \\done          \\done ------^

Beam graphs are fixed before they run, so the loop is unrolled: K is the most turns any domain of
the run allows, and each episode's own budget (its domain's, capped at K) ends it on time.
"""

from __future__ import annotations

import apache_beam as beam

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.episodes import MAX_TURNS, TurnLimits, turns_for
from flywheel.domains.registry import get_domain
from flywheel.records.attempt import Attempt
from flywheel.transforms.context_strategies import CONTEXTS
from flywheel.transforms.errors import ERRORS_TAG
from flywheel.transforms.policy_model import PolicyModelHandler
from flywheel.transforms.turn import DONE_TAG, Turn, end_episode, start_episode


def turn_stages(domains, limits: int | TurnLimits) -> int:
    """The Turn stages a run needs: the most turns of any of its domains (1 means single-turn).
    Domains that come only from task files count through --max-turns or their override."""
    return TurnLimits.of(limits).most([get_domain(d) for d in domains])


def is_multi_turn(attempt, limits: int | TurnLimits) -> bool:
    return turns_for(get_domain(attempt.domain), limits) > 1


class Episodes(beam.PTransform):
    """Attempts of multi-turn domains in; {"attempts": ended episodes, "errors": rows} out.
    `settings`: the run's [episode] settings, handed once to the stages that read them."""

    def __init__(self, handler: PolicyModelHandler, stages: int, settings: EpisodeSettings,
                 backend: str, options: dict | None = None):
        super().__init__()
        self.handler, self.stages, self.settings = handler, stages, settings
        self.backend, self.options = backend, dict(options or {})
        CONTEXTS.get(settings.context)  # an unknown strategy fails as the pipeline is built, naming the known

    def _start(self, attempt):
        return start_episode(attempt, self.settings, self.stages)

    def expand(self, attempts):
        live = attempts | "StartEpisodes" >> beam.Map(self._start).with_output_types(Attempt)
        done, errors = [], []
        for k in range(1, self.stages + 1):
            out = live | f"Turn{k}" >> Turn(self.handler, self.settings, self.backend, self.options)
            done.append(out[DONE_TAG])
            errors.append(out[ERRORS_TAG])
            live = out["live"]
        leftover = live | "OutOfStages" >> beam.Map(
            lambda a: a.replace(episode=a.episode.replace(end=MAX_TURNS)))
        ended = (*done, leftover) | "AllDone" >> beam.Flatten() | "EndEpisodes" >> beam.Map(end_episode)
        return {"attempts": ended, ERRORS_TAG: tuple(errors) | "TurnErrors" >> beam.Flatten()}
