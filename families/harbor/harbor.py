"""The `harbor` domain: a Harbor task folder as a multi-turn terminal episode.

The model works with the shell family's tools (`run_shell`, `write_file`, `submit`; a response
without a tool call is a command). As in the shell family, the episode's state is the script of
its commands so far, so any worker can run any turn: each `run_shell` runs in a fresh sandbox
that lays out the task's working directory, replays the earlier commands as one bash session
(a `cd` or a variable carries over, as in Harbor's tmux session; their output is dropped) and
then the new one, whose output the model reads. Nothing is scored during the episode.

The answer is that script. It is scored as Harbor scores a trial (harnesses/harbor.py): the
script runs in a fresh environment, every process it left is killed, everything but the
working directory is deleted, and only then are the task's tests written to /tests and
`bash /tests/test.sh` run; the reward is what it writes to /logs/verifier (verifier.py). The
tests never reach the sandbox before that, and the agent's own /logs/verifier/reward.txt is
gone before they run.

Where it runs: a task whose Dockerfile builds nothing (dockerfile.py) runs on `local` and on
`docker` with the sandbox's own system; one that needs its image names it (`image`), and runs
on `docker` once `flywheel tasks validate --sandbox docker` has built it (images.py).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from flywheel.domains.domain import SandboxNeeds, Step
from flywheel.domains.registry import register_domain
from flywheel.domains.report_channel import harness_report
from flywheel.domains.tools import WRITE_FILE
from flywheel.families.shell.shell_state import ShellDomain, script_of

HARNESS = (Path(__file__).resolve().parent / "harnesses" / "harbor.py").read_text()
REPORT_MARKER = "FLYWHEEL-HARBOR "
TURN_TIMEOUT_S = 60.0     # one tool call, replay included, at most
ANSWER_TIMEOUT_S = 300.0  # the answer's replay, at most (task.toml's agent timeout is a model's)
VERIFIER_TIMEOUT_S = 600.0
MEMORY_MB, STORAGE_MB = (256, 4096), (64, 1024)  # the task.toml values, clamped into these


def _clamp(value: float, bounds: tuple[int, int]) -> int:
    return int(min(max(value, bounds[0]), bounds[1]))


@register_domain
class HarborTasks(ShellDomain):
    name = "harbor"
    description = "Harbor task folders (Terminal-Bench 2.0 format; --tasks DIR), scored by tests/test.sh"
    verifier = "harbor_reward"
    report_marker = REPORT_MARKER
    sandbox = SandboxNeeds(language="bash", files=("harness.py",), timeout_s=TURN_TIMEOUT_S,
                           memory_mb=1024)
    required_fields = ("task_id", "prompt", "tests", "workdir", "limits")
    max_turns = 16
    max_new_tokens = 1024  # a command may carry a whole file in a heredoc
    log_bytes = 4000

    def task_count(self) -> int | None:
        return 0

    def validate_task(self, task: dict) -> list[str]:
        problems = [p for p in super(ShellDomain, self).validate_task(task)]
        if not problems and "test.sh" not in task["tests"]:
            problems.append("field `tests` has no test.sh")
        return problems

    def _plan(self, task: dict, before: str, now: str | None, marker: str, verify: bool,
              with_solution: bool = False) -> dict:
        limits = task["limits"]
        workdir = task["workdir"]
        plan = {"marker": marker, "before": before, "now": now, "env": task.get("env") or {},
                "prefixes": {workdir: "app", "/tests": "tests", "/solution": "solution",
                             "/logs": "logs"},
                "app": task.get("app_files") or {}, "app_b64": task.get("app_binary") or {},
                "log_bytes": self.log_bytes}
        if task.get("needs_image"):
            plan.update(image_workdir=workdir, needs_image=task["needs_image"])
        if with_solution:
            plan.update(solution=task.get("solution") or {},
                        solution_b64=task.get("solution_binary") or {})
        agent_s = min(limits["agent_timeout_s"], ANSWER_TIMEOUT_S if verify else TURN_TIMEOUT_S)
        plan["budget_s"] = agent_s
        timeout = agent_s + 5
        if verify:
            plan.update(tests=task["tests"], tests_b64=task.get("tests_binary") or {},
                        verifier_env=task.get("verifier_env") or {},
                        verifier_budget_s=min(limits["verifier_timeout_s"], VERIFIER_TIMEOUT_S))
            timeout += plan["verifier_budget_s"]
        spec = {"files": {"harness.py": HARNESS}, "command": ["python", "harness.py"],
                "stdin": json.dumps(plan),
                "limits": {"timeout_s": timeout, "cpu_s": timeout, "processes": 128,
                           "open_files": 256, "output_bytes": 1 << 20,
                           "memory_mb": _clamp(limits["memory_mb"], MEMORY_MB),
                           "disk_mb": _clamp(limits["storage_mb"], STORAGE_MB)}}
        if task.get("image"):
            spec["image"] = task["image"]
        return spec

    def program(self, task: dict, response: str, marker: str = REPORT_MARKER) -> dict:
        """The answer's run: its script replayed, then the task's tests (the verification)."""
        return self._plan(task, script_of(response) if response.strip() else "", None, marker, True)

    def solution_program(self, task: dict, marker: str = REPORT_MARKER) -> dict:
        """Harbor's oracle: solution/ at /solution, `bash /solution/solve.sh`, then the tests."""
        return self._plan(task, "bash /solution/solve.sh", None, marker, True, with_solution=True)

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return f"```bash\n{task['reference_script']}\n```"

    def start_state(self, task: dict) -> dict:
        return {"answer": ""}

    def tool_program(self, task: dict, state: dict, call, marker: str = REPORT_MARKER) -> dict | None:
        if call.name == WRITE_FILE.name:
            return None  # a heredoc line of the script (the shell family's observe)
        return self._plan(task, state["answer"], call.arguments["command"], marker, False)

    def observe(self, task: dict, state: dict, call, result) -> Step:
        if call.name == WRITE_FILE.name:
            step = super().observe(task, {"files": {}, **state}, call, result)
            return Step(step.observation, {"answer": step.state["answer"]})
        report, problem, _ = harness_report(result, REPORT_MARKER)
        if report is None or "agent" not in report:
            why = (report or {}).get("environment_error") or problem
            return Step(f"the command did not run: {why}", state)
        agent = report["agent"]
        status = "timed out" if agent.get("timed_out") else f"exit {agent.get('exit_code')}"
        text = (agent.get("log") or "") + ("" if agent.get("exit_code") == 0 else f"[{status}]")
        return Step(text, {"answer": state["answer"] + call.arguments["command"] + "\n"})
