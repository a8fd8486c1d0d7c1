"""--max-tool-calls: past its limit an episode's tool calls are refused as tool errors (nothing runs,
the state stays), submit still ends it, and refused calls do not count; on the real sandbox."""

import pytest

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call
from flywheel.sandbox import get_backend
from flywheel.transforms.expand import expand_task
from flywheel.transforms.turn import act, end_episode, start_episode, with_sample

DOMAIN = get_domain("repo")
TASK = DOMAIN.normalize_task({
    "task_id": "calc-limit", "domain": "repo", "prompt": "total() of a list is wrong",
    "repo": {"files": {"calc/__init__.py": "", "calc/ops.py": "def total(xs):\n    return -sum(xs)\n"}},
    "hidden_tests": [{"id": "h1", "module": "calc.ops", "call": "total([5, 6])", "expect": 11}]})


@pytest.fixture(scope="module")
def sandbox():
    with get_backend("local") as backend:
        yield backend


def play(sandbox, calls, max_tool_calls):
    attempt, = expand_task(TASK, run_id="t", iteration=0, policy_version=0, seed=0, n_samples=1,
                           temperature=1.0, mode="train")
    settings = EpisodeSettings(max_turns=len(calls), max_tool_calls=max_tool_calls)
    attempt = start_episode(attempt, settings)
    runner = ToolRunner(sandbox)
    for name, arguments in calls:
        turn = {"action": render_call(ToolCall(name, arguments)), "action_start": 0, "action_end": 0,
                "segment": 0}
        attempt = with_sample(attempt, {"turns": [*attempt.turns, turn], "episode": dict(attempt.episode)})
        attempt, error = act(attempt, runner, settings)
        assert error is None, error
        if attempt.episode.end:
            break
    return attempt


def test_calls_past_the_limit_are_refused_and_submit_still_ends(sandbox):
    fix = ("edit_file", {"path": "calc/ops.py", "old": "-sum", "new": "sum"})
    calls = [("list_files", {}), ("read_file", {"path": "calc/ops.py"}), fix, ("submit_changes", {})]
    limited = play(sandbox, calls, max_tool_calls=2)
    observations = [t["observation"] for t in limited.turns]
    assert observations[2] == "error: no tool calls left (2 made): end the episode with submit_changes"
    assert limited.turns[2]["tool_error"] and limited.turns[2]["exit_code"] is None  # nothing ran
    assert limited.episode.end == "submitted" and "calc/ops.py" not in end_episode(limited).response
    free = play(sandbox, calls, max_tool_calls=0)
    assert free.episode.end == "submitted" and "+    return sum(xs)" in end_episode(free).response


def test_refused_calls_do_not_count(sandbox):
    calls = [("list_files", {}), ("read_file", {"path": "nope.py"}), ("list_files", {}), ("list_files", {})]
    done = play(sandbox, calls, max_tool_calls=2)
    # a failed read is still a call made (it ran); the third call is refused, and so is the fourth
    assert [bool(t.get("tool_error")) for t in done.turns] == [False, False, True, True]
