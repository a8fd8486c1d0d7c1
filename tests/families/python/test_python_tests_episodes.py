"""python_tests tasks multi-turn: run_tests shows visible cases only, in the real sandbox."""

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall

DOMAIN = get_domain("py_mbpp")


def step(task, code, sandbox):
    call = ToolCall("run_tests", {"code": code})
    result = ToolRunner(sandbox).run(DOMAIN, lambda nonce: DOMAIN.tool_request(task, {}, call, nonce))
    return DOMAIN.observe_call(task, {}, call, result)


def test_run_tests_shows_visible_failures_and_never_hidden_cases(sandbox):
    task = next(t for t in DOMAIN.rows() if t.get("hidden_test_list"))
    task = DOMAIN.normalize_task(task)
    wrong = step(task, f"def {task['code'].split('(')[0][4:]}(*a):\n    return 0\n", sandbox)
    assert wrong.done is None and wrong.reward == 0.0
    assert wrong.observation.startswith(f"0/{len(task['test_list'])} visible tests pass")
    assert task["test_list"][0] in wrong.observation
    assert not any(hidden in wrong.observation for hidden in task["hidden_test_list"])
    right = step(task, task["code"], sandbox)
    assert right.done == "solved" and right.reward == 1.0 and right.state["answer"] == task["code"]
    broken = step(task, "def oops(:\n", sandbox)
    assert broken.done is None and "SyntaxError" in broken.observation


def test_run_code_shows_output_and_keeps_the_answer(sandbox):
    task = DOMAIN.normalize_task(DOMAIN.rows()[0])
    call = ToolCall("run_code", {"code": "print(6 * 7)\nimport sys; sys.exit(3)"})
    result = sandbox.run(DOMAIN.tool_request(task, {"answer": "kept"}, call))
    step = DOMAIN.observe_call(task, {"answer": "kept"}, call, result)
    assert step.observation == "42\n[exit 3]" and step.state == {"answer": "kept"} and step.done is None
