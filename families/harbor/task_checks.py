"""`flywheel tasks validate` for Harbor tasks: the solution must earn reward 1, doing nothing 0.

The solution runs as Harbor's oracle agent runs it (solution/ at /solution, `bash
/solution/solve.sh`), the empty answer as an agent that did nothing; both are then verified by
the task's tests/test.sh exactly as a model's answer is. On `local`, a task whose Dockerfile
needs its image is a problem saying so (validate it with `--sandbox docker`); on `docker`, each
task's image is built offline first (images.py), and a base image missing from the daemon is a
problem naming it.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.sandbox import SandboxError, get_backend
from flywheel.verifiers import get_verifier


def harbor_problems(task: dict, sandbox, backend: str) -> list[str]:
    domain, verifier = get_domain("harbor"), get_verifier("harbor_reward")
    if backend == "local" and task.get("needs_image"):
        return [f"needs its image ({task['needs_image']}): validate it with --sandbox docker"]
    runner, problems = ToolRunner(sandbox, retries=0), []
    oracle = runner.run(domain, lambda nonce: domain.to_request(
        domain.solution_program(task, **domain.report(nonce))), None)
    for name, verdict, want in (("the solution (solution/solve.sh)", verifier(task, "", oracle), 1.0),
                                ("doing nothing", verifier(task, "", domain.run(sandbox, task, "")), 0.0)):
        if verdict.reward != want or verdict.verdict == "error":
            problems.append(f"{name} earns reward {verdict.reward:g}, not {want:g}: {verdict.detail}")
    return problems


def check_harbor_tasks(tasks: list[dict[str, Any]], progress: Callable[[str], Any],
                       backend: str = "local") -> list[str]:
    """Problems of every harbor task of `tasks`, as "source: task ID: problem" strings."""
    harbor = [t for t in tasks if t.get("domain") == "harbor"]
    if not harbor:
        return []
    try:
        sandbox = get_backend(backend, **({"warm": False} if backend == "local" else {}))
    except SandboxError as e:
        return [f"Harbor tasks cannot be run here (--no-run skips it): {e}"]
    problems = []
    with sandbox:
        client = None
        if backend == "docker":
            import docker
            url = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
            client = docker.DockerClient(base_url=url, version="auto", timeout=600)
        for n, task in enumerate(harbor, 1):
            progress(f"[{n}/{len(harbor)}] running {task['task_id']} in the sandbox")
            found = []
            try:
                if client is not None:
                    from flywheel.families.harbor.images import build_task_image
                    build_task_image(client, task)
                found = harbor_problems(task, sandbox, backend)
            except SandboxError as e:
                found = [str(e)]
            problems += [f"{task['source']}: task {task['task_id']}: {p}" for p in found]
    return problems
