"""The attempt record: one sampled attempt at one task, as it moves through the rollout.

Expand creates it; each later stage returns a copy with its own fields filled in
(`dataclasses.replace`), never mutating its input, so a stage reads like the story of what it adds.
`row()` is the attempt's `trajectories` row. The record needs no Beam: a script, a test or another
runner builds and reads it as it is; Beam encodes it with transforms/attempt_coder.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flywheel.sandbox import ExecResult
from flywheel.schemas import TRAJECTORIES

if TYPE_CHECKING:
    from flywheel.domains.episodes import EpisodeState


@dataclass(frozen=True)
class Attempt:
    # Expand: who the attempt is and how to sample it
    run_id: str
    iteration: int
    policy_version: int
    mode: str                                  # train | heldout | validation | eval
    domain: str
    task_id: str
    group_id: str                              # the attempts whose rewards are normalized together
    sample_index: int
    prompt: str
    task: dict[str, Any]
    sampling_temperature: float                # 0 means greedy
    max_new_tokens: int
    seed: int                                  # this attempt's own sampling seed
    # Generate
    prompt_token_ids: list[int] = field(default_factory=list)  # the ids the policy saw
    response: str = ""
    response_token_ids: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    response_mask: list[int] | None = None     # episodes: 1 at the policy's tokens, 0 at observations
    finish_reason: str | None = None           # stop | length
    started_at: dt.datetime | None = None
    checkpoint_digest: str | None = None       # digest of the weights that sampled it
    # Execute
    execution: ExecResult | None = None
    turns: list[dict[str, Any]] = field(default_factory=list)
    segments: list[dict[str, Any]] = field(default_factory=list)  # an episode's earlier contexts (context_strategies.py)
    episode: EpisodeState | None = None        # a live episode's state (transforms/turn.py)
    episode_end: str | None = None             # submitted | solved | max_turns | budget
    episode_flags: list[str] = field(default_factory=list)  # hacks its state showed (EpisodeDomain.episode_flags)
    sandbox_backend: str | None = None
    sandbox_wall_ms: float | None = None
    sandbox_cpu_ms: float | None = None
    failure: str | None = None                 # input | environment | verifier: not scorable;
                                               # unreadable: scored by Verify as a failed attempt
    # Verify
    verifier: str | None = None
    verifier_version: str | None = None
    reward_raw: float | None = None
    verdict: str | None = None                 # pass | fail | error | pending (a person judges it)
    reward_source: str | None = None           # verifier | review_pending
    reward_components: dict[str, float] = field(default_factory=dict)
    exploit_suspected: bool = False
    verdict_detail: str = ""
    finished_at: dt.datetime | None = None
    # NormalizeRewards and FilterTrajectories
    advantage: float | None = None
    zero_variance: bool = False                # its group carries no signal (credit.has_signal)
    filtered: bool = False
    filter_reason: str | None = None

    def replace(self, **changes) -> "Attempt":
        return dataclasses.replace(self, **changes)

    def row(self) -> dict[str, Any]:
        """The `trajectories` row of this attempt (the table's columns that are fields)."""
        return {name: getattr(self, name) for name in ROW_FIELDS}

    def context(self) -> dict[str, Any]:
        """What an `errors` row records about the attempt."""
        return {name: getattr(self, name) for name in
                ("run_id", "iteration", "domain", "task_id", "sample_index", "prompt", "response")}


UNREADABLE = "unreadable"  # a response that could not be made into a program (transforms/execute.py)
FIELDS = tuple(f.name for f in dataclasses.fields(Attempt))
ROW_FIELDS = tuple(name for name in TRAJECTORIES.names if name in FIELDS)
