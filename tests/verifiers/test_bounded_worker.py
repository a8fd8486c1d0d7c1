"""The bounded worker: deadlines and memory caps end a verification as data, the worker comes
back for the next one, and the Verify stage blames the response or the verifier by one rule.

Real worker processes, real rlimits, real verifiers; the two verifiers registered here are real
code too (one allocates without end, one raises on what it was given), found by the worker
through this module, as a user's plugin verifier would be.
"""

import pytest

from flywheel.domains.registry import get_domain
from flywheel.sandbox import ExecResult
from flywheel.transforms.expand import expand_task
from flywheel.transforms.verify import verify_attempt
from flywheel.verifiers import Verdict, get_verifier, register_verifier
from flywheel.verifiers.bounded import BoundedVerifier, Bounds


@register_verifier("test_bounded_hog", "1")
def _hog(task, response, execution=None):
    """Grows memory without end on the response "hog"; scores anything else."""
    hoard = []
    while response == "hog":
        hoard.append(bytearray(64 * 2**20))
    return Verdict(float(response == task["answer"]), "pass" if response == task["answer"] else "fail")


@register_verifier("test_bounded_picky", "1")
def _picky(task, response, execution=None):
    """Raises on responses it cannot handle, and on tasks without an answer (its own defect)."""
    want = task["answer"]  # KeyError: the task's defect
    if "boom" in response:
        raise ValueError("cannot handle this response")
    return Verdict(float(response == want), "pass" if response == want else "fail")


@register_verifier("test_bounded_crash", "1")
def _crash(task, response, execution=None):
    """Kills its own process (the worker, never this one) on the response "die"."""
    import os
    if response == "die" and os.getpid() != task["test_pid"]:
        os.kill(os.getpid(), 9)
    return Verdict(0.0, "fail")


@pytest.fixture(scope="module")
def bounded():
    with BoundedVerifier(Bounds(deadline_s=3, memory_mb=256)) as worker:
        yield worker


HOSTILE_MATH = "\\boxed{exp(exp(exp(exp(100))))}"  # hangs sympy's evaluation for good


def math_attempt(response, answer=None):
    task = get_domain("math_linear").make_task("train", 0, 0)
    task = {**task, "answer": answer if answer is not None else task["answer"]}
    attempt, = expand_task(task, run_id="t", iteration=0, policy_version=0, seed=0, n_samples=1,
                           temperature=0.0, mode="eval")
    return attempt.replace(response=response)


def test_a_verification_past_its_deadline_is_killed_and_the_worker_comes_back(bounded):
    verifier = get_verifier("math_answer")
    task = math_attempt("").task
    outcome = bounded.run(verifier, task, HOSTILE_MATH)
    assert outcome.verdict is None and outcome.failure == "verifier_deadline"
    again = bounded.run(verifier, task, f"\\boxed{{{task['answer']}}}")
    assert again.verdict is not None and again.verdict.verdict == "pass"


def test_a_verification_past_its_memory_cap_is_a_memory_failure(bounded):
    hog = get_verifier("test_bounded_hog")
    outcome = bounded.run(hog, {"answer": "x"}, "hog")
    assert outcome.verdict is None and outcome.failure == "verifier_memory"
    again = bounded.run(hog, {"answer": "x"}, "x")
    assert again.verdict is not None and again.verdict.verdict == "pass", again


def test_an_exception_comes_back_as_data_with_its_type(bounded):
    outcome = bounded.run(get_verifier("test_bounded_picky"), {"answer": "a"}, "boom")
    assert outcome.verdict is None and outcome.failure == "ValueError"
    assert "cannot handle" in outcome.message


def test_verify_attempt_scores_exhaustion_as_a_model_failure(bounded):
    out, error = verify_attempt(math_attempt(HOSTILE_MATH), bounded)
    assert (out.verdict, out.reward_raw, out.failure) == ("fail", 0.0, None)
    assert error["kind"] == "model" and error["stage"] == "verify"
    assert error["error_type"] == "verifier_deadline"
    out, error = verify_attempt(math_attempt("\\boxed{" + "1" * 3 + "}"), bounded)
    assert out.verdict in ("pass", "fail") and error is None


def test_a_response_the_verifier_cannot_handle_is_model_its_own_defect_environment(bounded):
    """The rule itself, on a verifier that raises: the probe with a blank response decides."""
    from flywheel.transforms import verify
    picky = get_verifier("test_bounded_picky")
    attempt = math_attempt("boom")
    outcome = bounded.run(picky, {"answer": "a"}, "boom")
    assert verify._blame(bounded, picky, attempt.replace(task={"answer": "a"}), outcome) == "model"
    assert verify._blame(bounded, picky, attempt.replace(task={}), outcome) == "environment"


def test_a_task_whose_own_answer_does_not_parse_is_still_environment(bounded):
    out, error = verify_attempt(math_attempt("\\boxed{3}", answer="@@ not math"), bounded)
    assert (out.verdict, out.failure) == ("error", "verifier")
    assert error["kind"] == "environment" and error["error_type"] == "ValueError"


def test_the_cap_is_the_warm_worker_plus_memory_mb(bounded):
    """A worker that holds sympy and reasoning-gym still verifies: the cap is headroom, not total."""
    out, error = verify_attempt(math_attempt("\\boxed{x^2 + 2x + 1 - (x+1)^2 + 3}", answer="3"), bounded)
    assert error is None and out.verdict == "pass"


def test_a_worker_that_dies_is_a_crash_and_the_next_call_starts_a_fresh_one(bounded):
    import os
    crash, task = get_verifier("test_bounded_crash"), {"test_pid": os.getpid()}
    outcome = bounded.run(crash, task, "die")
    assert outcome.verdict is None and outcome.failure == "verifier_crashed"
    assert bounded.run(crash, task, "live").verdict.verdict == "fail"


def test_a_worker_started_by_a_thread_that_ended_still_verifies():
    """The worker dies with the thread that started it (PR_SET_PDEATHSIG); run starts another."""
    import threading
    verifier = get_verifier("math_answer")
    task = math_attempt("").task
    with BoundedVerifier(Bounds(deadline_s=3)) as worker:
        starter = threading.Thread(target=worker.run, args=(verifier, task, "\\boxed{0}"))
        starter.start()
        starter.join()
        outcome = worker.run(verifier, task, f"\\boxed{{{task['answer']}}}")
        assert outcome.verdict is not None and outcome.verdict.verdict == "pass"


@register_verifier("test_bounded_reads_output", "1")
def _reads_output(task, response, execution=None):
    """Breaks on what the response's code printed, never on the response text: a verifier the
    probe must not be fooled by (it would break on the same output whatever the response)."""
    if execution is not None and "boom" in execution.stdout:
        raise RecursionError("the printed value nests too deeply")
    return Verdict(float(response == task["answer"]), "pass" if response == task["answer"] else "fail")


def test_the_blame_probe_never_reuses_the_attempts_execution(bounded):
    """An execution is the response's to shape: one that breaks the verifier is the model's
    fault, even though a blank response with that same execution would break it too."""
    from flywheel.sandbox import ExecResult
    from flywheel.transforms import verify
    reads_output = get_verifier("test_bounded_reads_output")
    printed = ExecResult(0, "boom\n", "", False, False, None, 1.0, 1.0, "local")
    attempt = math_attempt("anything").replace(task={"answer": "a"}, execution=printed)
    outcome = bounded.run(reads_output, attempt.task, attempt.response, printed)
    assert outcome.verdict is None and outcome.failure == "RecursionError"
    assert verify._blame(bounded, reads_output, attempt, outcome) == "model"
    probe = verify.blank_execution(printed)
    assert (probe.stdout, probe.stderr, probe.exit_code, probe.kill_reason) == ("", "", 0, None)
    assert verify.blank_execution(None) is None


def _scored_in(worker, domain, response):
    """Score a `domain` attempt in `worker`, with what running nothing gives as its execution."""
    task = get_domain(domain).make_task("train", 0, 0)
    attempt, = expand_task(task, run_id="t", iteration=0, policy_version=0, seed=0, n_samples=1,
                           temperature=0.0, mode="eval")
    ran = ExecResult(exit_code=0, stdout="", stderr="", timed_out=False, truncated=False,
                     kill_reason=None, wall_ms=0.0, cpu_ms=0.0, backend="local")
    scored, _ = verify_attempt(attempt.replace(response=response, execution=ran), worker)
    return scored


def test_the_worker_loads_only_what_the_runs_verifiers_import():
    """A run scored by repo_tests and python_tests alone never imports sympy or reasoning-gym in
    its verifier worker (they were preloaded for every run)."""
    with BoundedVerifier(Bounds(deadline_s=10)) as worker:
        verifiers = {_scored_in(worker, d, "x").verifier for d in ("repo_bugs", "humaneval")}
        loaded = worker.loaded_modules()
    assert verifiers == {"repo_tests", "python_tests"}
    assert {"flywheel.families.repository.repo_tests", "flywheel.families.python.verifier"} <= loaded
    assert not {"sympy", "reasoning_gym", "flywheel.families.math.verifier"} & loaded


@pytest.mark.slow  # imports sympy in a fresh worker (seconds on a loaded machine)
def test_a_verifiers_heavy_imports_load_with_it_before_its_deadline():
    """math_answer's sympy is imported with the verifier's module on its first use, uncapped and
    off the deadline, so the first verification is scored like any other."""
    with BoundedVerifier(Bounds(deadline_s=10)) as worker:
        assert "sympy" not in worker.loaded_modules()
        scored, error = verify_attempt(math_attempt("\\boxed{0}"), worker)
        assert scored.verifier == "math_answer" and scored.verdict in ("pass", "fail"), error
        assert "sympy" in worker.loaded_modules()
