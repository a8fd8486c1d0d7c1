"""A repository episode whose shell command writes outside the repository earns 0 and is flagged
`touched_outside`, whatever its answer; scratch space ($HOME, $TMPDIR) and the task's own test
runs are not "outside". On the real sandbox (local; docker too where it runs), through the Turn
stage's own functions and Verify."""

import pytest

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call
from flywheel.transforms.expand import expand_task
from flywheel.transforms.turn import act, end_episode, start_episode, with_sample
from flywheel.transforms.verify import verify_attempt

DOMAIN = get_domain("repo")
OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
WRITES_TMP = "import os\n\n\ndef test_total():\n    from calc.ops import total\n" \
             "    open('/tmp/left-by-the-tests', 'w').write('x')\n    assert total([4, 5]) == 9\n"
TASK = DOMAIN.normalize_task({
    "task_id": "calc-out", "domain": "repo", "prompt": "total() of a list is wrong",
    "repo": {"files": {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/test_ops.py": WRITES_TMP}},
    "visible_tests": ["tests/test_ops.py"],
    "hidden_tests": [{"id": "h1", "module": "calc.ops", "call": "total([5, 6, 7])", "expect": 18}]})
FIX = {"name": "edit_file", "arguments": {"path": "calc/ops.py", "old": "s -= x", "new": "s += x"}}


def episode(sandbox, calls):
    """The episode that takes `calls` (then submits), ended and scored as the rollout does."""
    attempt, = expand_task(TASK, run_id="t", iteration=0, policy_version=0, seed=0, n_samples=1,
                           temperature=1.0, mode="train")
    attempt = start_episode(attempt, EpisodeSettings(max_turns=len(calls) + 1))
    runner = ToolRunner(sandbox)
    for call in [*calls, {"name": "submit_changes", "arguments": {}}]:
        action = render_call(ToolCall(call["name"], call["arguments"]))
        turn = {"action": action, "action_start": 0, "action_end": 0, "segment": 0}
        attempt = with_sample(attempt, {"turns": [*attempt.turns, turn], "episode": dict(attempt.episode)})
        attempt, error = act(attempt, runner, EpisodeSettings())
        assert error is None, error
    ended = end_episode(attempt)
    executed = ended.replace(execution=DOMAIN.run(sandbox, TASK, ended.response))
    return attempt, verify_attempt(executed)[0]


def shell(command):
    return {"name": "run_shell", "arguments": {"command": command}}


def test_a_clean_fix_with_scratch_writes_and_test_runs_earns_its_reward(repo_sandbox):
    """Caches and temporary files in $HOME and $TMPDIR, and whatever the task's tests write, are
    not the model's writes outside the repository."""
    calls = [shell("echo y > $TMPDIR/notes && python -c 'import os, tempfile; tempfile.mkstemp(); "
                   "os.makedirs(os.path.expanduser(\"~/.cache/pip\"))' && echo done"),
             FIX, {"name": "run_visible_tests", "arguments": {}}]
    live, scored = episode(repo_sandbox, calls)
    assert live.turns[0]["observation"].endswith("done\n\n[exit 0]")  # minimal images have no coreutils
    assert "outside" not in live.episode.state and scored.episode_flags == []
    assert "left-by-the-tests" in live.turns[2]["observation"]  # noted, not held against it
    assert (scored.reward_raw, scored.verdict, scored.exploit_suspected) == (1.0, "pass", False)


@pytest.mark.parametrize("command, shown", [
    ("echo x > ../notes.txt", "notes.txt"),                     # beside the repository
    ("echo x > /tmp/cache.txt", "cache.txt"),                   # /tmp is the work dir, not scratch
    ("echo 'print(1)' > ../harness.py", "harness.py"),          # the harness's own file
    ("python -c 'import os; os.remove(\"../unified_diff.py\")'", "unified_diff.py"),  # ... removed
    ("cd .. && python -c 'import os; os.mkdir(\"lib\"); open(\"lib/conftest.py\", \"w\")'", "lib")])
def test_a_fix_with_a_write_outside_the_repository_earns_nothing(sandbox, command, shown):
    flagged(sandbox, command, shown)


def test_on_docker_too(repo_sandbox):
    flagged(repo_sandbox, "echo x > /tmp/cache.txt", "cache.txt")


def flagged(sandbox, command, shown):
    live, scored = episode(sandbox, [FIX, shell(command)])
    assert shown in live.episode.state["outside"]
    assert scored.episode_flags == ["touched_outside"]
    assert (scored.reward_raw, scored.verdict, scored.exploit_suspected) == (0.0, "fail", True)
    assert scored.reward_components["exploit_touched_outside"] == 1.0
    assert scored.reward_components["hidden_pass_rate"] == 1.0  # the answer itself was right
    assert "touched_outside" in scored.verdict_detail
