"""Episodes: multi-turn attempts run to their end, ended and executed, in one stage.

    attempts -> StartEpisodes -> RunEpisodes (each episode its own loop, then its answer run)
             -> executed attempts (ready for Verify, as Execute's output)
                                       \\-> errors

Each episode's own budget (its domain's turns, or the run's episode settings) ends it; the graph
does not depend on it (transforms/episode_loop.py).
"""

from __future__ import annotations

import apache_beam as beam

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.episodes import TurnLimits, turns_for
from flywheel.domains.registry import get_domain
from flywheel.records.attempt import Attempt
from flywheel.transforms.context_strategies import CONTEXTS
from flywheel.transforms.episode_loop import RunEpisodes
from flywheel.transforms.errors import ERRORS_TAG
from flywheel.transforms.policy_model import PolicyModelHandler
from flywheel.transforms.turn import start_episode


def turn_stages(domains, limits: int | TurnLimits) -> int:
    """The most turns any of `domains` allows (1: every one is single-turn). Domains that come
    only from task files count through --max-turns or their override."""
    return TurnLimits.of(limits).most([get_domain(d) for d in domains])


def is_multi_turn(attempt, limits: int | TurnLimits) -> bool:
    return turns_for(get_domain(attempt.domain), limits) > 1


class Episodes(beam.PTransform):
    """Attempts of multi-turn domains in; {"attempts": ended episodes, executed as Execute executes
    an attempt (ready for Verify), "errors": rows} out.
    `settings`: the run's [episode] settings, handed once to the stages that read them.
    `stages` is accepted for callers of the unrolled graph and ignored. `journal`: the folder
    ended episodes are written to as they end (transforms/episode_journal.py; None: none)."""

    def __init__(self, handler: PolicyModelHandler, stages: int | None, settings: EpisodeSettings,
                 backend: str, options: dict | None = None, journal: str | None = None):
        super().__init__()
        self.handler, self.settings = handler, settings
        self.backend, self.options = backend, dict(options or {})
        self.journal = journal
        CONTEXTS.get(settings.context)  # an unknown strategy fails as the pipeline is built, naming the known

    def _start(self, attempt):
        return start_episode(attempt, self.settings)

    def expand(self, attempts):
        ran = (attempts
               | "StartEpisodes" >> beam.Map(self._start).with_output_types(Attempt)
               | "RunEpisodes" >> RunEpisodes(self.handler, self.settings, self.backend, self.options,
                                              self.journal))
        return {"attempts": ran["attempts"], ERRORS_TAG: ran[ERRORS_TAG]}
