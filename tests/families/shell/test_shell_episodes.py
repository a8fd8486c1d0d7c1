"""Shell tasks multi-turn: each run_shell call runs over the files the earlier ones left, for
real in the sandbox; the episode's commands are its answer, scored from the task's files."""

import random

import pytest

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, ToolCallError, parse_action, render_call
from flywheel.pipelines.demonstrations import demonstrated
from flywheel.policy.backends import create_policy
from flywheel.policy.backends.tiny import tokens
from flywheel.verifiers import get_verifier

DOMAIN = get_domain("shell_pick")


def run_shell(task, state, command, sandbox):
    call = ToolCall("run_shell", {"command": command})
    result = ToolRunner(sandbox).run(DOMAIN, lambda nonce: DOMAIN.tool_request(task, state, call, nonce))
    return DOMAIN.observe_call(task, state, call, result)


def test_an_episode_looks_then_acts_and_its_commands_are_scored(sandbox):
    task = DOMAIN.make_task("heldout", 4, seed=0)
    other = next(name for name in task["files"] if name != "a")
    state = DOMAIN.start_state(task)
    listing = run_shell(task, state, "ls", sandbox)
    assert listing.observation == f"a\n{other}\n" and listing.done is None and listing.reward < 1
    failed = run_shell(task, listing.state, "cat nothing-here", sandbox)
    assert "No such file" in failed.observation and failed.observation.endswith("[exit 1]")
    made = run_shell(task, failed.state, "echo draft > notes; mkdir -p d", sandbox)
    assert made.state["files"]["notes"] == "draft\n"
    solved = run_shell(task, made.state, f"rm notes; cp {other} b", sandbox)  # notes was kept
    assert solved.done == "solved" and solved.reward == 1.0
    answer = DOMAIN.final_response(task, solved.state)
    assert answer == f"ls\ncat nothing-here\necho draft > notes; mkdir -p d\nrm notes; cp {other} b\n"
    verdict = get_verifier("shell_state")(task, answer, DOMAIN.run(sandbox, task, answer))
    assert verdict.reward == 1.0


def test_submit_ends_with_the_commands_so_far():
    task = DOMAIN.make_task("train", 0, seed=0)
    step = DOMAIN.observe_call(task, {"files": task["files"], "answer": "ls\n"}, ToolCall("submit", {"answer": "x"}), None)
    assert step.done == "submitted" and DOMAIN.final_response(task, step.state) == "ls\n"


def test_a_demonstrated_episode_trains_on_actions_only():
    policy = create_policy("tiny", {}, 0, "cpu")
    task = DOMAIN.make_task("train", 1, seed=0)
    ids, mask = demonstrated(policy, DOMAIN, task, random.Random(0), run_max_turns=0)
    listing = "".join(f"{n}\n" for n in sorted(task["files"]))
    first, second = tokens.encode_response("ls"), tokens.encode_response(task["reference_script"])
    seen = tokens.encode_observation(listing)
    assert ids == first + seen + second
    assert mask == [1] * len(first) + [0] * len(seen) + [1] * len(second)
    single, single_mask = demonstrated(policy, get_domain("add"), get_domain("add").make_task("train", 0, 0),
                                       random.Random(0), run_max_turns=0)
    assert single_mask == [1] * len(single)


def test_write_file_changes_the_state_and_the_answer_writes_it_too(sandbox):
    task = DOMAIN.make_task("train", 2, seed=0)
    other = next(name for name in task["files"] if name != "a")
    content = task["files"][other].rstrip("\n")
    state = DOMAIN.start_state(task)
    step = DOMAIN.observe_call(task, state, ToolCall("write_file", {"path": "b", "content": content}), None)
    assert step.observation == "wrote b" and step.state["files"]["b"] == content + "\n"
    listed = run_shell(task, step.state, "cat b", sandbox)
    assert listed.observation == content + "\n" and listed.done == "solved"
    answer = DOMAIN.final_response(task, listed.state)
    verdict = get_verifier("shell_state")(task, answer, DOMAIN.run(sandbox, task, answer))
    assert verdict.reward == 1.0


def test_a_path_of_any_printable_name_is_written_by_the_answer_script_too(sandbox):
    """write_file takes what a real tree names (spaces, quotes, `+`, `@`); the answer script quotes it,
    so replaying the script writes the very file the state holds."""
    task = DOMAIN.make_task("train", 2, seed=0)
    path, content = "my dir/it's +x@1.txt", "a b 'c' $HOME"
    state = DOMAIN.start_state(task)
    step = DOMAIN.observe_call(task, state, ToolCall("write_file", {"path": path, "content": content}), None)
    assert step.state["files"][path] == content + "\n"
    script = step.state["answer"] + "cat -- \"my dir/it's +x@1.txt\"\n"
    assert run_shell(task, state, script, sandbox).observation == content + "\n"
    for bad in ("/etc/passwd", "../up", "a/../../b", "line\nbreak", "nul\x00"):
        with pytest.raises(ToolCallError):
            parse_action(render_call(ToolCall("write_file", {"path": bad, "content": "x"})), DOMAIN.tools, "run_shell")
