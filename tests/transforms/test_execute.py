"""Execute outside Beam: real sandbox runs under the domain's limits; limits hit by model code
and sandbox failures."""

from concurrent.futures import ThreadPoolExecutor

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.transforms.execute import execute_batch
from flywheel.transforms.expand import expand_task
from flywheel.sandbox import SandboxBackend, SandboxError, get_backend, register_backend


def attempts(responses):
    task = get_domain("pyexpr").make_task("train", 0, seed=0)
    out = expand_task(task, run_id="t", iteration=0, policy_version=0, seed=0,
                      n_samples=len(responses), temperature=1.0, mode="train")
    return [a.replace(response=r) for a, r in zip(out, responses)]


def test_model_code_hitting_a_limit_is_a_scored_attempt_and_a_model_error():
    batch = attempts(["__import__('time').sleep(30) or 1+1", "2+2"])
    with get_backend("local") as backend, ThreadPoolExecutor(2) as pool:
        out, errors = execute_batch(batch, ToolRunner(backend), pool)
    assert out[0].execution.kill_reason == "timeout" and out[0].failure is None
    assert out[1].execution.stdout.strip() == "4" and out[1].turns[0]["exit_code"] == 0
    assert [(e["kind"], e["error_type"], e["stage"]) for e in errors] == [("model", "timeout", "execute")]


@register_backend("test-always-broken")
class BrokenBackend(SandboxBackend):
    """A sandbox whose spawn always fails, as a dead Docker daemon would."""
    name = "test-always-broken"
    calls = 0

    def run(self, request):
        BrokenBackend.calls += 1
        raise SandboxError("spawn failed: daemon gone")


def test_sandbox_failures_are_retried_then_become_environment_errors():
    batch = attempts(["1+1"])
    with ThreadPoolExecutor(1) as pool:
        out, errors = execute_batch(batch, ToolRunner(BrokenBackend(), retries=2, backoff_s=0.01), pool)
    assert BrokenBackend.calls == 3
    assert out[0].failure == "environment" and out[0].execution is None
    assert errors[0]["kind"] == "environment" and errors[0]["retry_count"] == 2
