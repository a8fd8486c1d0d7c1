"""Execute, Turn and Domain.run take every action through the one tool runner: a rollout on a
sandbox whose every request fails twice before it runs gives the rows a rollout on the plain local
sandbox gives, with no environment error, and each call reached the sandbox from inside
`ToolRunner.run`."""

import collections
import sys
import threading

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import IterationSpec, run_rollout
from flywheel.sandbox import SandboxBackend, SandboxError, get_backend, register_backend

pytestmark = pytest.mark.xdist_group("episodes")


STAGES = {"_run_one": "Execute", "act": "Turn", "run": "Domain.run"}


def caller() -> tuple[str | None, bool]:
    """(the stage whose frame is on the stack, whether a ToolRunner.run lies between it and the
    backend)."""
    frame, through = sys._getframe(2), False
    while frame is not None:
        name = frame.f_code.co_name
        if name == "run" and isinstance(frame.f_locals.get("self"), ToolRunner):
            through = True
        elif name in STAGES and frame.f_globals["__name__"].startswith("flywheel."):
            return STAGES[name], through
        frame = frame.f_back
    return None, through


@register_backend("test-fails-twice")
class FailsTwice(SandboxBackend):
    """The local sandbox behind a flaky spawn: each distinct request fails twice, then runs."""
    name = "test-fails-twice"
    callers: list[tuple[str | None, bool]] = []  # (the stage, through the runner) per call

    def __init__(self):
        self.inner, self.tries, self.lock = get_backend("local"), collections.Counter(), threading.Lock()

    def run(self, request):
        FailsTwice.callers.append(caller())
        with self.lock:
            self.tries[repr(request)] += 1
            tries = self.tries[repr(request)]
        if tries <= 2:
            raise SandboxError(f"spawn failed (try {tries})")
        return self.inner.run(request)

    def close(self):
        self.inner.close()


def rollout(run_dir, sandbox: str):
    settings = {"domains": ("fix_function", "pyexpr"), "tasks_per_domain": 2,
                "heldout_per_domain": 1, "n_samples": 2, "sandbox": sandbox}
    cfg = RunConfig(seed=11, iterations=1, rollout=RolloutSettings(**settings),
                    episode=EpisodeSettings(max_turns=2), policy=PolicySpec())
    run_rollout(cfg, IterationSpec("runner", 0, policy_version=0, checkpoint_uri=None),
                RunLayout(str(run_dir)), PipelineOptions([]))
    timing = ("started_at", "finished_at", "sandbox_wall_ms", "sandbox_cpu_ms")
    rows = []
    for r in RunLayout(str(run_dir)).read_table("trajectories").to_pylist():
        turns = [{k: v for k, v in t.items() if k != "duration_ms"} for t in r["turns"]]
        rows.append({**{k: v for k, v in r.items() if k not in timing}, "turns": turns})
    errors = RunLayout(str(run_dir)).read_table("errors").to_pylist()
    return sorted(rows, key=lambda r: (r["task_id"], r["sample_index"])), errors


@pytest.mark.slow  # two rollouts; test_domain_run_goes_through_the_runner_with_one_try stays quick
def test_a_flaky_sandbox_changes_no_row_of_execute_or_turn(tmp_path):
    FailsTwice.callers.clear()
    flaky, flaky_errors = rollout(tmp_path / "flaky", "test-fails-twice")
    plain, _ = rollout(tmp_path / "plain", "local")
    assert flaky == plain and not [e for e in flaky_errors if e["kind"] == "environment"]
    assert any(len(r["turns"]) > 1 for r in flaky if r["domain"] == "fix_function")
    assert set(FailsTwice.callers) == {("Execute", True), ("Turn", True)}


def test_domain_run_goes_through_the_runner_with_one_try():
    FailsTwice.callers.clear()
    domain = get_domain("pyexpr")
    task = domain.make_task("train", 0, seed=0)
    backend = FailsTwice()
    try:
        with pytest.raises(SandboxError, match="try 1"):
            domain.run(backend, task, "2+2")
        assert FailsTwice.callers == [("Domain.run", True)]
    finally:
        backend.close()
