"""A run's episode settings (`[episode]` of the run config): one object for every stage that needs it.

Turns, the token budget, the context strategy and the turns it keeps, the observation size and
the tool-call limit, and how many episodes a worker runs at once, are the run's, not any one
episode's: they travel once, as this frozen object, to the stages that read them (Episodes,
RunEpisodes, the context strategies, act), while the attempt record's `EpisodeState` carries only
what differs per episode.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EpisodeSettings:
    """How multi-turn episodes run (domains with tools; single-turn domains ignore it)."""
    max_turns: int = 0                    # turns per episode of a domain with tools; 0: each domain's own
    domain_max_turns: tuple[str, ...] = ()  # DOMAIN=N: one domain's turns, over max_turns
    tokens: int = 0                       # token budget of one episode (0: the policy's context)
    observation_chars: int = 2000         # longer observations are cut in the middle, marked
    context: str = "full"                 # once the context is full: full (end), cut, anchored, summarize
    keep_turns: int = 4                   # turns cut/anchored/summarize contexts keep whole
    max_tool_calls: int = 0               # tool calls per episode besides submit (0: no limit but turns)
    concurrency: int = 16                 # episodes one worker process runs at once, each its own loop

    def __post_init__(self):
        for name in ("max_turns", "tokens", "max_tool_calls"):
            if getattr(self, name) < 0:
                raise ValueError(f"episode.{name} must be >= 0, got {getattr(self, name)}")
        if self.concurrency < 1:
            raise ValueError(f"episode.concurrency must be >= 1, got {self.concurrency}")
        if self.keep_turns < 1:
            raise ValueError(f"episode.keep_turns must be >= 1, got {self.keep_turns}")
        if self.observation_chars < 1:
            raise ValueError(f"episode.observation_chars must be >= 1, got {self.observation_chars}")

    def limits(self):
        """The run's TurnLimits (max_turns with the domain_max_turns overrides); ValueError
        naming a malformed override."""
        from flywheel.domains.episodes import TurnLimits
        return TurnLimits.from_settings(self.max_turns, self.domain_max_turns)
