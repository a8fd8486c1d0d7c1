"""The tool runner for real: a backend that fails a request's first tries, then runs it in the real
local sandbox; one nonce per call, kept across its retries; the harness's report read through the
nonce; the blame rule; the one output cut."""

import threading

import pytest

from flywheel.families.builtins.pyexpr import PythonExpression
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner, Unbuildable, cut_output
from flywheel.sandbox import SandboxBackend, SandboxError, get_backend
from flywheel.verifiers import get_verifier

MBPP = get_domain("py_mbpp")


class FailsFirst(SandboxBackend):
    """The local sandbox behind a flaky spawn: each distinct request fails its first `failures`
    tries (SandboxError), then runs for real. Keeps every request it was handed."""

    def __init__(self, failures: int):
        self.inner, self.failures, self.seen = get_backend("local"), failures, []
        self.lock = threading.Lock()

    def run(self, request):
        with self.lock:
            self.seen.append(request)
            tries = self.seen.count(request)
        if tries <= self.failures:
            raise SandboxError(f"spawn failed (try {tries})")
        return self.inner.run(request)

    def close(self):
        self.inner.close()


@pytest.fixture
def flaky():
    backends = []

    def make(failures: int) -> FailsFirst:
        backends.append(FailsFirst(failures))
        return backends[-1]
    yield make
    for backend in backends:
        backend.close()


def mbpp_task():
    return MBPP.make_task("train", 0, seed=0)


def test_a_flaky_sandbox_is_retried_under_one_nonce_and_the_report_is_read(flaky):
    backend, task = flaky(2), mbpp_task()
    step = MBPP.answer_step(task, task["code"], ToolRunner(backend, retries=2, backoff_s=0.01))
    assert len(backend.seen) == 3 and backend.seen.count(backend.seen[0]) == 3  # nonce and all
    nonce = backend.seen[0].stdin.split(MBPP.report_marker, 1)[1][:32]
    assert len(nonce) == 32 and nonce not in step.result.stdout  # signed by it, read without it
    assert step.result.stdout.splitlines()[-1].startswith(MBPP.report_marker)
    assert get_verifier(MBPP.verifier)(task, task["code"], step.result).reward == 1.0
    assert step.done == "submitted" and step.observation == (step.result.stdout + step.result.stderr)[-2000:]


def test_each_call_has_its_own_nonce(flaky):
    backend, task = flaky(0), mbpp_task()
    runner = ToolRunner(backend)
    runner.run(MBPP, lambda nonce: MBPP.request(task, task["code"], nonce))
    runner.run(MBPP, lambda nonce: MBPP.request(task, task["code"], nonce))
    first, second = backend.seen
    assert first.stdin != second.stdin and first.files == second.files


def test_a_sandbox_that_stays_down_raises_after_the_retries(flaky):
    backend, task = flaky(5), mbpp_task()
    with pytest.raises(SandboxError, match="try 3"):
        ToolRunner(backend, retries=2, backoff_s=0.01).run(
            MBPP, lambda nonce: MBPP.request(task, task["code"], nonce))
    assert len(backend.seen) == 3


class _Picky(PythonExpression):
    name = "test_tool_runner_picky"

    def program(self, task, response):
        if task.get("broken") or "unbuildable" in response:
            raise RecursionError("maximum recursion depth exceeded")
        return super().program(task, response)


def test_the_blame_rule_and_nothing_to_run(flaky):
    domain, backend = _Picky(), flaky(0)
    task = domain.make_task("train", 0, seed=0)
    runner = ToolRunner(backend)
    with pytest.raises(Unbuildable) as model:
        domain.answer_step(task, "unbuildable", runner)
    with pytest.raises(Unbuildable) as task_defect:
        domain.answer_step({**task, "broken": True}, "2+3", runner)
    assert (model.value.blame, task_defect.value.blame) == ("model", "input")
    assert isinstance(model.value.problem, RecursionError)
    assert runner.run(domain, lambda nonce: None) is None and backend.seen == []
    assert domain.answer_step(task, "2+3", runner).result.stdout.strip() == "5"


def test_output_is_cut_one_way_with_two_keeps():
    text = "a" * 3000 + "z" * 1000
    assert cut_output(text, 2000, keep="tail") == (text[-2000:], 2000)
    middle, cut = cut_output(text, 2000)
    assert cut == 2000 and len(middle) <= 2000 and middle.startswith("a") and middle.endswith("z")
    assert "[... 2000 characters cut ...]" in middle
    assert cut_output("short", 2000) == cut_output("short", 2000, keep="tail") == ("short", 0)


def test_a_domain_that_runs_nothing_steps_without_the_sandbox(flaky):
    backend, domain = flaky(0), get_domain("add")
    task = domain.make_task("train", 0, seed=0)
    step = domain.step(task, {}, task["answer"], ToolRunner(backend))
    assert (step.done, step.result, backend.seen) == ("submitted", None, [])
