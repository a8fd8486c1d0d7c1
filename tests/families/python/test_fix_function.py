"""fix_function: the built-in multi-turn domain, run for real in the sandbox."""

from flywheel.domains.episodes import SOLVED
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall
from flywheel.verifiers import get_verifier

DOMAIN = get_domain("fix_function")


def score(task, response, sandbox):
    return get_verifier("function_points")(task, response, DOMAIN.run(sandbox, task, response))


def test_tasks_are_seeded_and_the_shown_body_is_wrong():
    for index in range(30):
        task = DOMAIN.make_task("train", index, seed=1)
        assert task == DOMAIN.make_task("train", index, seed=1)
        assert task["body"] != task["answer"] and task["prompt"].startswith(f"fix {task['body']} ")


def test_the_fix_scores_1_and_the_bug_a_constant_or_a_call_0(sandbox):
    task = DOMAIN.make_task("train", 0, seed=2)
    assert score(task, task["answer"], sandbox).reward == 1.0
    y = task["visible"][0][1]
    for wrong in (task["body"], str(y), "x", f"x-x+{y}", "print(1) or x", "__import__('os')"):
        assert score(task, wrong, sandbox).reward == 0.0, wrong


def test_feedback_shows_the_value_and_the_fix_solves(sandbox):
    task = DOMAIN.make_task("heldout", 3, seed=0)
    (x, y), = task["visible"]
    state = DOMAIN.start_state(task)
    for body, solved in ((task["body"], None), (task["answer"], SOLVED)):
        call = ToolCall("run_tests", {"code": body})
        result = ToolRunner(sandbox).run(DOMAIN, lambda nonce: DOMAIN.tool_request(task, state, call, nonce))
        step = DOMAIN.observe_call(task, state, call, result)
        assert step.done == solved and step.state["answer"] == body
        assert step.observation == ("ok" if solved else f"f({x})={eval(body, {'x': x})}")
    broken = ToolCall("run_tests", {"code": "x+"})
    result = sandbox.run(DOMAIN.tool_request(task, state, broken))
    assert DOMAIN.observe_call(task, state, broken, result).observation.startswith("SyntaxError")


def test_submit_ends_the_episode_with_its_answer():
    task = DOMAIN.make_task("train", 1, seed=0)
    call = ToolCall("submit", {"answer": "x+1"})
    assert DOMAIN.tool_request(task, {}, call) is None
    step = DOMAIN.observe_call(task, {}, call, None)
    assert step.done == "submitted" and DOMAIN.final_response(task, step.state) == "x+1"
