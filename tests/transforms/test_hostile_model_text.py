"""Hostile model text through the real stages, on every sandbox backend that proved its isolation
(tests/conftest.py `verified`): an action or an answer that cannot be read, or whose program
prints what cannot be read, is the model's failure as data (a tool-error observation; a failed
attempt with reward 0), never an exception out of a stage, and never an environment error."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.families.builtins.pyexpr import PythonExpression
from flywheel.domains.registry import DOMAINS, get_domain
from flywheel.domains.tools import MAX_ACTION_CHARS
from flywheel.domains.tool_runner import ToolRunner
from flywheel.transforms.execute import execute_batch
from flywheel.transforms.expand import expand_task
from flywheel.transforms.turn import act, start_episode
from flywheel.transforms.verify import verify_attempt

# The body of f(x) prints, at exit, after the JSON line of values, a line nested 5,000 deep.
PRINTS_DEEP = "__import__('atexit').register(lambda: print('[' * 5000)) and x"


def attempt_of(domain: str, response: str = ""):
    task = get_domain(domain).make_task("train", 0, seed=0)
    one, = expand_task(task, run_id="r", iteration=0, policy_version=0, seed=0, n_samples=1,
                       temperature=1.0, mode="train")
    return one.replace(response=response)


def live_episode(domain: str, action: str):
    attempt = start_episode(attempt_of(domain), EpisodeSettings(max_turns=3))
    return attempt.replace(turns=[{"action": action, "action_start": 0, "action_end": 1}])


@pytest.mark.parametrize("action", [
    "<tool_call>" + "[" * 5000,                                        # RecursionError in json
    '<tool_call>{"name": "run_tests", "arguments": {"code": ' + "[" * 3000 + "]" * 3000 + "}}",
    "<tool_call>" + " " * (MAX_ACTION_CHARS - 20) + "x",              # quadratic for the old pattern
    '<tool_call>{"name": "run_tests", "arguments": "' + "[" * 3000 + '"}',
    '<tool_call>{"name": "submit", "arguments": {"answer": "' + "9" * 5000 + '"}, "x": ' + "9" * 5000 + "}",
])
def test_an_unreadable_action_is_a_tool_error_and_the_episode_goes_on(verified, action):
    attempt, error = act(live_episode("fix_function", action), ToolRunner(verified), EpisodeSettings())
    turn = attempt.turns[-1]
    assert error is None and attempt.failure is None
    assert turn["tool_error"] and turn["observation"].startswith("error: ")
    assert attempt.episode.end is None and attempt.episode.turn == 1


def test_printed_output_that_cannot_be_read_is_an_observation(verified):
    attempt, error = act(live_episode("fix_function", PRINTS_DEEP), ToolRunner(verified), EpisodeSettings())
    turn = attempt.turns[-1]
    assert error is None and attempt.failure is None and turn["tool"] == "run_tests"
    assert turn["exit_code"] == 0 and turn["reward"] == 0.0  # it ran; its values could not be read
    assert attempt.episode.end is None


def score(attempts, backend):
    with ThreadPoolExecutor(2) as pool:
        executed, errors = execute_batch(attempts, ToolRunner(backend), pool)
    scored = [verify_attempt(a) for a in executed]
    return [a for a, _ in scored], errors + [e for _, e in scored if e]


def test_single_turn_output_that_cannot_be_read_is_a_failed_attempt(verified):
    (out,), errors = score([attempt_of("fix_function", PRINTS_DEEP)], verified)
    assert (out.verdict, out.reward_raw, out.failure) == ("fail", 0.0, None)
    assert all(e["kind"] == "model" for e in errors)


class _Picky(PythonExpression):
    """pyexpr, except that its program cannot be built for a response holding "unbuildable" (as a
    parser of the response would fail), nor for any response to a task marked broken."""

    name = "test_picky_program"

    def program(self, task, response):
        if task.get("broken") or "unbuildable" in response:
            raise RecursionError("maximum recursion depth exceeded")
        return super().program(task, response)


@pytest.fixture
def picky(monkeypatch):
    monkeypatch.setitem(DOMAINS._entries, _Picky.name, _Picky())
    return _Picky.name


def test_a_response_that_cannot_become_a_program_is_the_models_failure(verified, picky):
    """The blame rule at Execute: a blank response to the same task builds, so this response's
    content broke it: a failed attempt (reward 0) and a `model` errors row, not `input`."""
    good, bad = attempt_of(picky, "2+3"), attempt_of(picky, "unbuildable")
    (ok, out), errors = score([good, bad], verified)
    assert ok.verdict in ("pass", "fail") and ok.execution is not None
    assert (out.verdict, out.reward_raw, out.failure) == ("fail", 0.0, None)
    assert out.reward_components == {"unreadable_response": 1.0}
    assert [(e["stage"], e["kind"], e["error_type"]) for e in errors] == \
        [("execute", "model", "unreadable")]


def test_a_task_that_cannot_become_a_program_stays_an_input_error(verified, picky):
    broken = attempt_of(picky, "2+3")
    broken = broken.replace(task={**broken.task, "broken": True})
    (out,), errors = score([broken], verified)
    assert (out.verdict, out.failure) == ("error", "input")
    assert [(e["stage"], e["kind"]) for e in errors] == [("execute", "input")]


def test_replay_takes_hostile_actions_as_the_turn_stage_does(verified):
    """`flywheel replay` re-runs recorded actions through the same `EpisodeDomain.step`: a recorded
    action or output that cannot be read replays as the same error observation, never a crash."""
    from flywheel.cli.replay import replay_turns
    episode = live_episode("fix_function", "x")
    actions = ["<tool_call>" + "[" * 5000, PRINTS_DEEP, "<tool_call>" + " " * 60_000]
    recorded = []
    for action in actions:  # record them as the Turn stage would
        episode = episode.replace(turns=[*episode.turns[:-1], {"action": action}]) if not recorded \
            else episode.replace(turns=[*episode.turns, {"action": action}])
        episode, _ = act(episode, ToolRunner(verified), EpisodeSettings())
        recorded.append(episode.turns[-1])
    replayed = list(replay_turns(episode.task, recorded, verified, observation_chars=2000))
    assert [(tool, seen) for _, tool, seen, _ in replayed] == \
        [(t.get("tool"), t["observation"]) for t in recorded]
    # the unreadable calls replay exactly; the printing one ran again (under load a slow backend
    # may time it out, so only its shape is compared)
    assert [replayed[i][3] for i in (0, 2)] == [recorded[i]["observation"] for i in (0, 2)]
    assert replayed[1][1] == "run_tests" and isinstance(replayed[1][3], str)
