"""Turn: one step of an episode (sample its next action, take it), for the episode loop.

    episode -> generate_turn_batch (its next action, under the context strategy) -> with_sample
            -> act (parse the tool call, run it from the episode's state, observe) -> ... -> end_episode

transforms/episode_loop.py runs each episode as its own loop of these steps inside one Beam stage
(RunEpisodes); tests and benchmarks call them directly. `act` takes each action as one step of its
domain (`EpisodeDomain.step`, through the tool runner of domains/tool_runner.py, the same one
Execute uses). An episode ends when it is submitted, solved, out of turns or tokens, or stopped
by a sandbox failure. Everything an episode needs travels in its attempt record
(`Attempt.episode`, a frozen `EpisodeState`: turn number, state, the observation to show next).
`end_episode` then makes a done episode an ordinary attempt whose `response` is the episode's
answer, for the single-turn Execute/Verify.

Token accounting: an episode's sequence is its prompt ids followed by `response_token_ids`, which
hold every action (sampled ids with their log-probabilities, mask 1) and every observation (ids of
the text the environment returned, log-probability 0, mask 0) in order, appended and never
re-tokenized: what the trainer scores is what the policy saw. Observations are tokenized on the
generating worker, where the tokenizer is: a policy renders them its own way
(`encode_observation`: a chat template's tool message) and shows the tools in its prompt
(`encode_tool_prompt`), or keeps policy/policy.py's `PolicyDefaults`. Each action's turn records
the digest of the weights that sampled it (`checkpoint_digest`: the engine's, or the batching
engine client's for its last sample), and each sample's seed is the attempt's and the turn's
(`turn_seed`), so an action does not depend on which other requests shared its engine call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import apache_beam as beam

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.episodes import BUDGET, FAILED, MAX_TURNS, EpisodeState, Step, turns_for
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner, Unbuildable, cut_output
from flywheel.domains.tools import ToolCallError, parse_action
from flywheel.sandbox import SandboxError
from flywheel.records.attempt import Attempt
from flywheel.transforms.context_strategies import (CONTEXTS, SummaryCall, new_segment, reserve,
                                                     summary_call)
from flywheel.transforms.errors import error_row, now
from flywheel.transforms.generate import fit_prompt

if TYPE_CHECKING:
    from flywheel.policy.policy import Policy
    from flywheel.policy.rollout_engine import RolloutEngine


def count(name: str, n: int = 1) -> None:
    """The episode counters (flywheel/<name>: tool_calls, episodes_<end>, ...), Beam metrics of
    the stage whose thread takes the turn (RunEpisodes lends its loops the DoFn's metrics)."""
    beam.metrics.Metrics.counter("flywheel", name).inc(n)


def start_episode(attempt: Attempt, settings: EpisodeSettings, stages: int | None = None) -> Attempt:
    """A fresh episode for `attempt`: turn 0, the domain's start state and tools, and its turns
    (the run's `settings`; at most `stages` where a caller caps them)."""
    domain = get_domain(attempt.domain)
    turns = turns_for(domain, settings.limits())
    return attempt.replace(episode=EpisodeState(
        turn=0, max_turns=min(turns, stages) if stages else turns,
        state=domain.start_state(attempt.task), tools=[t.to_dict() for t in domain.tools]))


def tool_prompt_ids(policy: Policy, text: str, tools: list[dict]) -> list[int]:
    """The first turn's ids: the policy's prompt, with the tools where its format shows them."""
    return policy.encode_tool_prompt(text, tools)


def observation_ids(policy: Policy, text: str) -> list[int]:
    """Ids of an observation, as the policy reads it between two of its own turns."""
    return policy.encode_observation(text)


def turn_seed(seed: int, turn: int) -> int:
    """Each turn samples with its own seed, derived from the attempt's only."""
    return (seed + 0x9E3779B97F4A7C15 * turn) % (1 << 63)


def _context(policy: Policy, attempt: Attempt, settings: EpisodeSettings
             ) -> tuple[list[int], dict, SummaryCall | None]:
    """(the ids to continue, the token fields so far, a summary to ask for first) of a live
    episode before its next action, under the run's context strategy."""
    episode = attempt.episode
    if episode["turn"] == 0:
        prompt = tool_prompt_ids(policy, attempt.prompt, episode["tools"])
        prompt = fit_prompt(prompt, policy.context - attempt.max_new_tokens)
        return prompt, {"prompt_token_ids": prompt, "response_token_ids": [],
                        "response_logprobs": [], "response_mask": [], "turns": [], "segments": []}, None
    obs = observation_ids(policy, episode["observation"])
    start = len(attempt.response_token_ids)
    turns = [dict(t) for t in attempt.turns]
    turns[-1].update(observation_start=start, observation_end=start + len(obs))
    fields = {"prompt_token_ids": attempt.prompt_token_ids,
              "response_token_ids": [*attempt.response_token_ids, *obs],
              "response_logprobs": [*attempt.response_logprobs, *[0.0] * len(obs)],
              "response_mask": [*attempt.response_mask, *[0] * len(obs)], "turns": turns,
              "segments": attempt.segments}
    context = [*attempt.prompt_token_ids, *fields["response_token_ids"]]
    if settings.context == "full":
        return context, fields, None
    strategy, limit = CONTEXTS.get(settings.context), _limit(policy, settings)
    most = limit - attempt.max_new_tokens - reserve(strategy, policy, attempt)
    if len(context) > most:  # no room left for a whole next action (and what the strategy keeps)
        if getattr(strategy, "summarizes", False):
            return context, fields, summary_call(policy, attempt, fields, limit)
        rebuilt = strategy(policy, attempt, most, settings.keep_turns)
        if rebuilt is not None:
            return rebuilt, new_segment(attempt, rebuilt, settings.context), None
    return context, fields, None


def _limit(policy: Policy, settings: EpisodeSettings) -> int:
    """The most ids an episode's context may hold: the policy's, or the run's episode.tokens."""
    return min(policy.context, settings.tokens or policy.context)


def _sample(policy: Policy, engine: RolloutEngine, batch: Sequence[Attempt],
            prompts: dict[int, list[int]], rooms: dict[int, int], seeds: dict[int, int]) -> dict:
    """Row i of `batch` continued from prompts[i] by at most rooms[i] ids: one call per room, so
    no row may run past its own limit. Rows without room (< 1) get nothing."""
    by_room: dict[int, list[int]] = {}
    for i, room in rooms.items():
        if room >= 1:
            by_room.setdefault(room, []).append(i)
    samples = {}
    for room, rows in by_room.items():
        samples.update(zip(rows, engine.sample(
            [prompts[i] for i in rows], [batch[i].sampling_temperature for i in rows],
            [seeds[i] for i in rows], room)))
    return samples


def _summarize(policy: Policy, engine: RolloutEngine, batch: Sequence[Attempt],
               plans: list, settings: EpisodeSettings) -> None:
    """Ask the policy for the summaries `plans` want (one batched call per room), and rebuild
    those episodes' contexts from them in place. An episode whose summary cannot be asked for, or
    whose rebuilt context does not fit, goes on as it stands (and ends on budget if it must)."""
    calls = {i: call for i, (_, _, call) in enumerate(plans) if call is not None}
    samples = _sample(policy, engine, batch, {i: c.prompt for i, c in calls.items()},
                      {i: c.room for i, c in calls.items()},
                      {i: turn_seed(batch[i].seed, batch[i].episode["turn"] + (1 << 20)) for i in calls})
    for i, call in calls.items():
        attempt, (context, fields, _) = batch[i], plans[i]
        plans[i] = (context, fields, None)
        if i not in samples:
            continue
        strategy, limit, keep = CONTEXTS.get(settings.context), _limit(policy, settings), settings.keep_turns
        most = limit - attempt.max_new_tokens - reserve(strategy, policy, attempt)
        summary = policy.decode(samples[i].token_ids)
        rebuilt = strategy(policy, attempt, most, keep, summary)
        if rebuilt is None:  # even the summary and the last turn leave no room: try without a reserve
            rebuilt = strategy(policy, attempt, limit - attempt.max_new_tokens, keep, summary)
        if rebuilt is not None:
            count("context_summaries")
            plans[i] = (rebuilt, new_segment(attempt, rebuilt, settings.context, fields, call,
                                             samples[i], summary), None)


def generate_turn_batch(policy: Policy, batch: Sequence[Attempt], engine: RolloutEngine,
                        settings: EpisodeSettings) -> list[dict]:
    """Sample the next action of each live episode in `batch` with `engine` (running `policy`'s
    weights); an episode whose next action would not fit its token budget (the policy's
    context, or the run's episode.tokens) ends instead, with episode_end=BUDGET. Returns each
    attempt's changed fields."""
    started = now()
    plans = [_context(policy, attempt, settings) for attempt in batch]
    if any(call is not None for _, _, call in plans):
        _summarize(policy, engine, batch, plans, settings)
    limit = _limit(policy, settings)
    rooms = {i: min(a.max_new_tokens, limit - len(plans[i][0])) for i, a in enumerate(batch)}
    samples = _sample(policy, engine, batch, {i: p[0] for i, p in enumerate(plans)}, rooms,
                      {i: turn_seed(a.seed, a.episode["turn"]) for i, a in enumerate(batch)})
    results = []
    for i, (attempt, (context, fields, _)) in enumerate(zip(batch, plans)):
        room = rooms[i]
        episode = dict(attempt.episode)
        if i not in samples:  # ends as it was: the observation it has no room to read is not added
            count("episodes_out_of_tokens")
            results.append({"episode": {**episode, "end": BUDGET},
                            "started_at": attempt.started_at or started})
            continue
        s = samples[i]
        ids, logprobs, finish = list(s.token_ids), list(s.logprobs), s.finish_reason
        if len(ids) > room:  # the batch ran to a longer limit than this episode's own
            ids, logprobs, finish = ids[:room], logprobs[:room], "length"
        start = len(fields["response_token_ids"])
        action = policy.decode(ids)
        fields["turns"].append({"action": action, "action_start": start,
                                "action_end": start + len(ids), "segment": len(fields["segments"]),
                                "checkpoint_digest": getattr(engine, "digest", None)})
        results.append({
            **fields, "response_token_ids": [*fields["response_token_ids"], *ids],
            "response_logprobs": [*fields["response_logprobs"], *logprobs],
            "response_mask": [*fields["response_mask"], *[1] * len(ids)],
            "response": action, "finish_reason": finish, "episode": episode,
            "started_at": attempt.started_at or started})
    return results


def act(attempt: Attempt, runner: ToolRunner, settings: EpisodeSettings
        ) -> tuple[Attempt, dict | None]:
    """Take the episode's last action as one step of its domain, under the run's `settings`
    (tool-call limit, observation size); (the attempt after it, an errors row).

    Whatever the action holds, or its program prints, is the model's: an action that cannot be
    read or run is a tool-error observation and the episode goes on (`EpisodeDomain.step`); only
    the task (a blank call fails too: an `input` error) or the sandbox (`environment`, after the
    runner's retries) ends it as failed."""
    episode = attempt.episode
    if episode.end:  # ended before acting (out of tokens)
        return attempt, None
    domain, turn = get_domain(attempt.domain), dict(attempt.turns[-1])
    refused = out_of_tool_calls(domain, attempt, turn["action"], settings.max_tool_calls)
    if refused is not None:
        count("tool_calls_refused")
        return _observed(attempt, turn, refused, settings.observation_chars)
    try:
        step = domain.step(attempt.task, episode.state, turn["action"], runner)
    except SandboxError as e:
        return _failed(attempt, error_row("turn", "environment", e, attempt.context(),
                                          retry_count=runner.retries))
    except Unbuildable as e:  # the task cannot become a program: bad input, the episode ends
        return _failed(attempt, error_row("turn", "input", e.problem, attempt.context()))
    except Exception as e:  # noqa: BLE001  anything else the task makes fail: bad input too
        return _failed(attempt, error_row("turn", "input", e, attempt.context()))
    count("tool_calls_malformed" if step.tool_error and not step.output_unreadable else "tool_calls")
    if step.output_unreadable:
        count("observations_unreadable")
    return _observed(attempt, turn, step, settings.observation_chars)


def tool_calls_made(attempt: Attempt, submit: str) -> int:
    """The tool calls an episode has made so far (its submit tool, and refused calls, not counted)."""
    return sum(1 for t in attempt.turns[:-1] if t.get("tool") and not t.get("tool_error")
               and t["tool"] != submit)


def out_of_tool_calls(domain, attempt: Attempt, action: str, limit: int) -> Step | None:
    """episode.max_tool_calls (`limit`, 0: none): the refusal of a tool call past it (a
    tool-error observation; the episode goes on, and submit still ends it), else None."""
    submit = domain.submit_tool.name
    if not limit or tool_calls_made(attempt, submit) < limit:
        return None
    try:
        call = parse_action(action, domain.tools, domain.plain_tool)
    except ToolCallError:
        return None  # the step says what is wrong with it
    if call.name == submit:
        return None
    why = f"no tool calls left ({limit} made): end the episode with {submit}"
    return Step(f"error: {why}", attempt.episode.state, tool_error=why)


def _observed(attempt: Attempt, turn: dict, step: Step, observation_chars: int
              ) -> tuple[Attempt, dict | None]:
    """The attempt after `step`: its last turn's record (the observation cut to
    `observation_chars`), the episode's next state."""
    episode, result, error = attempt.episode, step.result, None
    turn.update(tool=step.call.name if step.call else None)
    if step.tool_error:
        turn["tool_error"] = step.tool_error
    observation, cut = cut_output(step.observation, observation_chars)
    turn.update(observation=observation, observation_cut=cut, reward=step.reward,
                exit_code=result.exit_code if result else None,
                duration_ms=result.wall_ms if result else None)
    if result is not None and result.kill_reason and result.kill_reason != "signal":
        error = error_row("turn", "model", f"killed: {result.kill_reason} limit", attempt.context())
        error["error_type"] = result.kill_reason
    number = episode.turn + 1
    episode = episode.replace(turn=number, state=step.state, observation=observation,
                              end=step.done or (MAX_TURNS if number >= episode.max_turns else None))
    return attempt.replace(turns=[*attempt.turns[:-1], turn], episode=episode), error


def _failed(attempt: Attempt, error: dict) -> tuple[Attempt, dict]:
    return attempt.replace(episode=attempt.episode.replace(end=FAILED), failure=error["kind"]), error


def with_sample(attempt: Attempt, fields: dict) -> Attempt:
    """A live episode with its sampled action: the sampler's `fields` on the attempt, its episode
    an EpisodeState again (the sampler hands it back as a mapping)."""
    attempt = attempt.replace(**fields)
    return attempt.replace(episode=EpisodeState.of(attempt.episode))


def end_episode(attempt: Attempt) -> Attempt:
    """A done episode as an attempt to score: its answer as `response`, how it ended, the hacks its
    state shows (scored 0 at Verify), and no state left in the record."""
    domain = get_domain(attempt.domain)
    episode = attempt.episode
    answer = domain.final_response(attempt.task, episode.state)
    if not answer and attempt.turns and not getattr(domain, "empty_answer_is_answer", False):
        answer = attempt.turns[-1].get("action") or ""  # a domain whose empty answer means "none yet"
    count(f"episodes_{episode.end}")
    count("episode_turns", len(attempt.turns))
    return attempt.replace(response=answer, episode=None, episode_end=episode.end,
                           episode_flags=list(domain.episode_flags(attempt.task, episode.state)))
