"""What a long episode sees once its context is full: context strategies, chosen per run (--context).

- `full`: everything, up to the token budget; then the episode ends (episode_end `budget`).
- `cut`: the observations of all but the last `keep_turns` turns become a marker.
- `anchored`: the problem statement, the domain's anchor (a repository episode's current diff),
  then only the last `keep_turns` turns (OpenHands' condensers, SWE-agent's history processors).
- `summarize`: the policy itself is asked (SUMMARY_REQUEST, as an observation) to summarize the
  episode so far; the problem statement, that summary, the anchor and the last `keep_turns` turns
  go on (OpenHands' LLMSummarizingCondenser). It rebuilds earlier than the others, while the
  context still has room for the request and a summary as long as an action (`reserve`), so the
  summarizer reads the whole context; where the last turn grew past that, it reads the segment's
  prompt and its latest turns that fit.

Token accounting stays exact. A rebuilt context is a new *segment*: the episode's ids so far close
as a segment of their own (`Attempt.segments`: its prompt and response ids, log-probabilities and
mask, as sampled), and the next turn continues from the rebuilt ids as a new prompt. Earlier
actions enter it as the very ids the policy sampled (never re-tokenized text: the drift of
verl #3960 cannot happen), observations through the policy's `encode_observation`. The trainer
trains each segment on exactly the ids the policy saw (trainer/segments.py). A summary is the
policy's own sampled text: its ids are trained like an action's, with the episode's advantage.
The summary call ends the closed segment (the request's ids, mask 0, then the summary's, mask 1;
`summary` holds its text), or, when it read only the latest turns, is a segment of its own with
that view as its prompt. Each rebuild counts in the Beam counter `context_rebuilds_<strategy>`. A strategy
that cannot fit the next action even after rebuilding returns None, and the episode ends on budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import apache_beam as beam

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import cut_output
from flywheel.records.attempt import Attempt
from flywheel.registry import Registry

if TYPE_CHECKING:
    from flywheel.policy.policy import Policy

CUT_MARKER = "[observation cut]"
OMITTED = "[{n} earlier turns omitted]"
SUMMARIZED = "[{n} earlier turns summarized]"
SUMMARY_REQUEST = ("[context full] Before your next action, summarize this episode for yourself: "
                   "the task, what you found, what you changed, what failed and what is left. "
                   "Write only the summary; the earlier turns will be replaced by it.")
ANCHOR_CHARS = 4000

Strategy = Callable[["Policy", Attempt, int, int], "list[int] | None"]  # (policy, attempt, most, keep_turns)
CONTEXTS: Registry[Strategy] = Registry("context strategy", home="flywheel.transforms.context_strategies")


def first_prompt(attempt: Attempt) -> list[int]:
    """The episode's first prompt ids (its first segment's)."""
    return list(attempt.segments[0]["prompt_token_ids"] if attempt.segments else attempt.prompt_token_ids)


def action_ids(attempt: Attempt, turn: dict) -> list[int]:
    """The ids the policy sampled for `turn`, from the segment that holds them."""
    k = turn.get("segment") or 0
    response = (attempt.segments[k]["response_token_ids"] if k < len(attempt.segments)
                else attempt.response_token_ids)
    return list(response[turn["action_start"]:turn["action_end"]])


def turn_ids(policy: Policy, attempt: Attempt, turns: list[dict], cut: int = 0) -> list[int]:
    """`turns` as the policy reads them: each action's sampled ids, then its observation's ids
    (the first `cut` observations as CUT_MARKER)."""
    ids, marker = [], policy.encode_observation(CUT_MARKER)
    for n, turn in enumerate(turns):
        ids += action_ids(attempt, turn)
        whole = policy.encode_observation(turn.get("observation") or "")
        ids += marker if n < cut and len(marker) < len(whole) else whole  # never longer for a cut
    return ids


@CONTEXTS.register("full")
def full(policy: Policy, attempt: Attempt, most: int, keep_turns: int) -> list[int] | None:
    return None  # never rebuilt: the budget ends the episode


@CONTEXTS.register("cut")
def cut(policy: Policy, attempt: Attempt, most: int, keep_turns: int) -> list[int] | None:
    """The first prompt and every action; the observations of all but the last keep_turns turns cut."""
    turns = attempt.turns
    for kept in range(min(keep_turns, len(turns)), -1, -1):
        ids = first_prompt(attempt) + turn_ids(policy, attempt, turns, cut=len(turns) - kept)
        if len(ids) <= most:
            return ids
    return None


@CONTEXTS.register("anchored")
def anchored(policy: Policy, attempt: Attempt, most: int, keep_turns: int) -> list[int] | None:
    """The first prompt, the domain's anchor, a marker, and the last keep_turns turns whole."""
    domain = get_domain(attempt.domain)
    anchor = cut_output(domain.context_anchor(attempt.task, attempt.episode.state), ANCHOR_CHARS)[0]
    turns = attempt.turns
    for kept in range(min(keep_turns, len(turns)), 0, -1):
        head = OMITTED.format(n=len(turns) - kept) + ("\n" + anchor if anchor else "")
        ids = (first_prompt(attempt) + policy.encode_observation(head)
               + turn_ids(policy, attempt, turns[len(turns) - kept:]))
        if len(ids) <= most:
            return ids
    return None


def summarized(policy: Policy, attempt: Attempt, most: int, keep_turns: int,
               summary: str) -> list[int] | None:
    """The first prompt, then SUMMARIZED with the policy's `summary` and the domain's anchor, then
    the last keep_turns turns whole."""
    anchor = cut_output(get_domain(attempt.domain).context_anchor(attempt.task, attempt.episode.state),
                        ANCHOR_CHARS)[0]
    turns = attempt.turns
    for kept in range(min(keep_turns, len(turns)), 0, -1):
        head = "\n".join(filter(None, [SUMMARIZED.format(n=len(turns) - kept), summary.strip(), anchor]))
        ids = (first_prompt(attempt) + policy.encode_observation(head)
               + turn_ids(policy, attempt, turns[len(turns) - kept:]))
        if len(ids) <= most:
            return ids
    return None


summarized.summarizes = True  # rebuilt from a model call: turn.py asks the policy first
summarized.reserve = lambda policy, attempt: (len(policy.encode_observation(SUMMARY_REQUEST))
                                             + attempt.max_new_tokens)
CONTEXTS.register("summarize")(summarized)


def reserve(strategy: Strategy, policy: Policy, attempt: Attempt) -> int:
    """Room a strategy keeps free beyond the next action (a summary call's request and reply)."""
    return strategy.reserve(policy, attempt) if hasattr(strategy, "reserve") else 0


@dataclass
class SummaryCall:
    """A summary the policy is to write before an episode's next action: it reads `view`, then
    `request`, and writes at most `room` ids. `whole`: `view` is the episode's context as it
    stands (else its latest turns)."""
    view: list[int]
    request: list[int]
    room: int
    whole: bool

    @property
    def prompt(self) -> list[int]:
        return [*self.view, *self.request]


def summary_call(policy: Policy, attempt: Attempt, fields: dict, limit: int) -> SummaryCall | None:
    """What the summarizer reads: the episode's whole context (`fields`: its token fields with the
    last observation) if the request and a summary as long as an action fit after it within
    `limit`; else the current segment's prompt (the problem, an earlier summary), a marker, and
    its latest turns that leave them room, as sampled; None when not even the last turn fits."""
    request = policy.encode_observation(SUMMARY_REQUEST)
    room, most = attempt.max_new_tokens, limit - len(request) - attempt.max_new_tokens
    prompt, response = list(fields["prompt_token_ids"]), list(fields["response_token_ids"])
    if len(prompt) + len(response) <= most:
        return SummaryCall(prompt + response, request, room, True)
    own = [t for t in fields["turns"] if (t.get("segment") or 0) == len(attempt.segments)]
    for dropped, turn in enumerate(own[1:], 1):
        view = (prompt + policy.encode_observation(OMITTED.format(n=dropped))
                + response[turn["action_start"]:])
        if len(view) <= most:
            return SummaryCall(view, request, room, False)
    return None


def new_segment(attempt: Attempt, prompt: list[int], strategy: str, fields: dict | None = None,
                call: SummaryCall | None = None, sample=None, summary: str = "") -> dict:
    """The token fields of an episode that continues from `prompt` as a new segment: its ids so
    far closed as a segment, the last observation read in the new prompt (not in any response).

    With a summary `call` and its `sample`: a call that read the whole context (`fields`, the
    episode's token fields with the last observation) ends the closed segment; one that read a
    view of the latest turns is a segment of its own."""
    turns = [dict(t) for t in (fields or {}).get("turns", attempt.turns)]
    first = next(n for n, t in enumerate(turns) if (t.get("segment") or 0) == len(attempt.segments))
    source = fields if call is not None and call.whole else {
        "prompt_token_ids": attempt.prompt_token_ids, "response_token_ids": attempt.response_token_ids,
        "response_logprobs": attempt.response_logprobs, "response_mask": attempt.response_mask or []}
    closed = {"prompt_token_ids": list(source["prompt_token_ids"]),
              "response_token_ids": list(source["response_token_ids"]),
              "response_logprobs": list(source["response_logprobs"]),
              "response_mask": list(source["response_mask"] or []),
              "first_turn": first, "context": strategy, "summary": None}
    segments = [*attempt.segments, closed]
    if call is None or not call.whole:
        turns[-1].update(observation_start=None, observation_end=None)
    if call is not None:
        ids, logprobs = list(sample.token_ids), [float(x) for x in sample.logprobs]
        tail = {"response_token_ids": [*call.request, *ids],
                "response_logprobs": [0.0] * len(call.request) + logprobs,
                "response_mask": [0] * len(call.request) + [1] * len(ids)}
        if call.whole:
            for key, more in tail.items():
                closed[key] += more
            closed["summary"] = summary
        else:
            segments.append({"prompt_token_ids": list(call.view), **tail, "first_turn": len(turns),
                             "context": strategy, "summary": summary})
    beam.metrics.Metrics.counter("flywheel", f"context_rebuilds_{strategy}").inc()
    return {"prompt_token_ids": prompt, "response_token_ids": [], "response_logprobs": [],
            "response_mask": [], "turns": turns, "segments": segments}
