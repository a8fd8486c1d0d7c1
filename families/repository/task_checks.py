"""Checks of users' repository tasks before a run (`flywheel tasks validate` runs them): each
task's snapshot, reference patch and checks in the sandbox, so that a hidden check the snapshot
already passes, a regression check it fails or a reference patch that fails is told up front."""

from __future__ import annotations

from typing import Any

from flywheel.domains.registry import get_domain
from flywheel.domains.report_channel import harness_report
from flywheel.families.repository.repo import REPORT_MARKER, RepoDomain
from flywheel.sandbox import SandboxError, get_backend


def repo_problems(task: dict[str, Any], sandbox) -> list[str]:
    """What is wrong with repository task `task` when run in `sandbox`: a hidden check the
    snapshot already passes, a regression check it fails, a check its reference patch fails."""
    domain = get_domain(task["domain"])
    hidden = {c["id"] for c in task["hidden_tests"]}
    runs = [("the snapshot", "", lambda cid: cid not in hidden)]
    if task.get("reference_patch"):
        runs.append(("the reference_patch", task["reference_patch"], lambda cid: True))
    problems = []
    for label, patch, should_pass in runs:
        try:
            report, problem, _ = harness_report(domain.run(sandbox, task, patch), REPORT_MARKER)
        except SandboxError as e:
            return problems + [f"{label}: the sandbox failed: {e}"[:400]]
        if report is None:
            problems.append(f"{label}: the harness gave no report: {problem}"[:400])
        elif report.get("pytest_missing"):
            hint = (f" (it names docker image {task['image']!r}: validate it with --sandbox docker)"
                    if task.get("image") and sandbox.name != "docker" else "")
            return problems + [f"pytest checks cannot run: the task's environment has no pytest{hint}"]
        elif report.get("install_error"):  # the snapshot's own package: the environment's problem
            return problems + [f"environment: {report['install_error']}"
                               + (f" (environment {domain.environment_of(task)!r})" if domain.environment_of(task) else "")]
        elif report.get("test_patch_error") or not report.get("applied"):
            problems.append(f"{label}: {report.get('test_patch_error') or report.get('error')}"[:400])
        else:
            if report.get("tampered"):
                problems.append(f"{label} edits protected files: {', '.join(report['tampered'][:5])}")
            for cid, outcome in (report.get("checks") or {}).items():
                if outcome.get("ok") != should_pass(cid):
                    kind = "hidden" if cid in hidden else "regression"
                    verb = "fails" if should_pass(cid) else "passes"
                    problems.append(f"{label} {verb} {kind} check {cid!r}"
                                    + (f": {outcome.get('why')}" if outcome.get("why") else "")[:300])
    return problems


def check_repo_tasks(tasks: list[dict[str, Any]], progress, backend: str = "local") -> list[str]:
    """Every repository task of `tasks` run in sandbox `backend` (repo_problems), as
    "source: task ID: problem" strings; `progress(line)` hears of each task first."""
    repo = [t for t in tasks if isinstance(get_domain(t["domain"]), RepoDomain)]
    if not repo:
        return []
    try:
        sandbox = get_backend(backend, **({"warm": False} if backend == "local" else {}))
    except SandboxError as e:
        return [f"repository tasks cannot be run here (--no-run skips it): {e}"]
    problems = []
    with sandbox:
        for n, task in enumerate(repo, 1):
            progress(f"[{n}/{len(repo)}] running {task['task_id']} in the sandbox")
            problems += [f"{task['source']}: task {task['task_id']}: {p}" for p in repo_problems(task, sandbox)]
    return problems
