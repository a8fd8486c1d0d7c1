"""Context strategies of long episodes, on the real sandbox: with a token budget too small for the
whole episode, `full` ends it on budget, `cut`, `anchored` and `summarize` rebuild the context as
new segments and finish it; every segment holds exactly the ids the policy sampled (a summary's
too), and the trainer's log-probs of each segment match the sampler's."""

import json

import pytest
import torch

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call
from flywheel.sandbox import get_backend
from flywheel.policy.backends import create_policy
from flywheel.policy.backends.tiny import tokens
from flywheel.trainer.segments import segment_rows
from flywheel.trainer.trajectory_batches import make_batch
from flywheel.transforms.context_strategies import CUT_MARKER, SUMMARY_REQUEST
from flywheel.transforms.episodes import Episodes
from flywheel.transforms.expand import expand_task
from flywheel.transforms.turn import act, end_episode, generate_turn_batch, start_episode, with_sample
from flywheel.verifiers import get_verifier
from flywheel.policy.rollout_engine import engine_for

REPO = get_domain("repo_bugs")
TURNS = 16


def episode(policy, task, sandbox, context, budget, keep=3, turns=TURNS):
    attempt, = expand_task(task, run_id="t", iteration=0, policy_version=0, seed=0, n_samples=1,
                           temperature=1.0, mode="train")
    settings = EpisodeSettings(max_turns=turns, tokens=budget, context=context, keep_turns=keep)
    attempt = start_episode(attempt, settings)
    runner = ToolRunner(sandbox)
    while not attempt.episode.end:
        attempt = with_sample(attempt, generate_turn_batch(policy, [attempt], engine_for(policy, local=True), settings)[0])
        attempt, error = act(attempt, runner, settings)
        assert error is None, error
    return attempt


def scripted(tmp_path, task):
    explore = [{"name": "read_file", "arguments": {"path": p}}
               for p in sorted(task["repo"]["files"]) if p.endswith(".py")]
    calls = [explore[i % len(explore)] for i in range(TURNS - len(task["golden"]))] + task["golden"]
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"prompt": task["prompt"], "actions": [
        render_call(ToolCall(c["name"], c["arguments"])) for c in calls]}) + "\n")
    return create_policy("scripted", {"script": str(script)}, 0)


@pytest.fixture(scope="module")
def sandbox():
    with get_backend("local") as backend:
        yield backend


@pytest.fixture(scope="module")
def task():
    return REPO.make_task("train", 2, 0)


def test_full_ends_on_budget_while_cut_and_anchored_finish_in_segments(tmp_path, task, sandbox):
    policy = scripted(tmp_path, task)
    budget = 3 * len(task["prompt"]) + 4000  # far less than 16 turns of whole-file reads
    full = episode(policy, task, sandbox, "full", budget)
    assert full.episode.end == "budget" and not full.segments and len(full.turns) < TURNS
    for context in ("cut", "anchored", "summarize"):
        done = episode(policy, task, sandbox, context, budget)
        assert done.episode.end == "submitted" and len(done.turns) == TURNS, context
        assert len(done.segments) >= 1 and all(s["context"] == context for s in done.segments)
        for segment in [*done.segments, done.row()]:  # every context fits the budget
            assert len(segment["prompt_token_ids"]) + len(segment["response_token_ids"]) <= budget
        scored = end_episode(done)
        verdict = get_verifier("repo_tests")(task, scored.response, REPO.run(sandbox, task, scored.response))
        assert verdict.reward == 1.0, (context, verdict)
        check_exact_ids(done)


def check_exact_ids(attempt):
    """Each action's ids, in whatever segment holds them, are the policy's sampled ids for its
    text; a rebuilt prompt starts with the first prompt and holds the kept actions' ids as sampled."""
    rows = segment_rows(attempt.row())
    assert len(rows) == len(attempt.segments) + 1
    assert sum(len(r["turns"]) for r in rows) == len(attempt.turns)
    first = attempt.segments[0]["prompt_token_ids"]
    for segment, row in zip(attempt.segments, rows):
        if segment["context"] == "summarize":  # the summary closes it: request (0), summary (1)
            mask = segment["response_mask"]
            n = len(tokens.encode_response(segment["summary"]))
            assert mask[-n:] == [1] * n and set(mask[-n - 5:-n]) == {0}
            assert segment["response_token_ids"][-n:] == tokens.encode_response(segment["summary"])
            assert SUMMARY_REQUEST.encode() in bytes(i for i in segment["response_token_ids"] if i < 256)
            assert segment["summary"].startswith("Summary: ")
    for row in rows:
        for turn in row["turns"]:
            ids = row["response_token_ids"][turn["action_start"]:turn["action_end"]]
            assert ids == tokens.encode_response(turn["action"])
            assert all(m == 1 for m in row["response_mask"][turn["action_start"]:turn["action_end"]])
        assert row["prompt_token_ids"][:len(first)] == first
    text = bytes(i for i in rows[-1]["prompt_token_ids"] if i < 256)
    marker = {"cut": CUT_MARKER, "anchored": "earlier turns omitted",
              "summarize": "earlier turns summarized"}[attempt.segments[-1]["context"]]
    assert marker.encode() in text


@pytest.mark.parametrize("context", ["anchored", pytest.param("summarize", marks=pytest.mark.slow)])
def test_the_trainer_scores_each_segment_as_the_sampler_did(sandbox, context):
    """The tiny policy samples fix_function episodes in a budget that forces rebuilds: the log-probs
    make_batch's rows get from token_logprobs match the sampled ones, segment by segment (the
    summaries it writes included)."""
    policy = create_policy("tiny", {"context": 256 if context == "anchored" else 640}, 0)
    policy.module.eval()
    domain = get_domain("fix_function")
    rebuilt, summaries = 0, []
    for index in range(6):
        task = domain.make_task("train", index, 0)
        attempt = episode(policy, task, sandbox, context, budget=100 if context == "anchored" else 360,
                          keep=1, turns=8 if context == "anchored" else 12)
        rows = [dict(r, advantage=0.0) for r in segment_rows(end_episode(attempt).row())]
        rebuilt += len(rows) - 1
        summaries += [s for s in attempt.segments if s["summary"] is not None]
        b = make_batch(rows, policy.pad_id, credit="outcome")
        with torch.no_grad():
            logprobs = policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"])
        mask = b["response_mask"].bool()
        assert (logprobs - b["old_logprobs"]).abs()[mask].max() < 1e-4
    assert rebuilt >= 1  # the budget forced at least one new segment
    if context == "summarize":  # summaries read the whole context, and only its latest turns
        assert {s["response_mask"][-1] for s in summaries} == {1}
        assert len({len(s["response_token_ids"]) > len(policy.encode_observation(SUMMARY_REQUEST))
                    + domain.max_new_tokens for s in summaries}) == 2


def test_an_unknown_strategy_is_refused_by_name():
    with pytest.raises(KeyError, match="anchored, cut, full"):
        Episodes(None, 4, EpisodeSettings(context="summary"), "local")
