"""Checks of users' repository tasks before a run (`flywheel tasks validate` runs them): each
task's snapshot, reference patch and checks in the sandbox, so that a hidden check the snapshot
already passes, a regression check it fails or a reference patch that fails is told up front."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
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
    problems, timeout = [], domain.limits_of(task)["timeout_s"]
    for label, patch, should_pass in runs:
        try:
            execution = domain.run(sandbox, task, patch)
            report, problem, _ = harness_report(execution, REPORT_MARKER)
        except SandboxError as e:
            return problems + [f"{label}: the sandbox failed: {e}"[:400]]
        if timed_out(execution, report):  # the task's limits, not any check: one line, not one per check
            problems.append(f"{'the reference' if patch else label} does not finish in {timeout:g} s; "
                            f"set limits.timeout_s (for example {min(3600, 2 * timeout):g})")
        elif report is None:
            problems.append(f"{label}: the harness gave no report: {problem}"[:400])
        elif report.get("pytest_missing"):
            return problems + [no_pytest(domain, task, sandbox)]
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


def timed_out(execution, report: dict | None) -> bool:
    """Whether a run ended for time: the sandbox killed the harness at the task's timeout, or
    the harness's pytest or module-check child ran out of its budget."""
    if report is None:
        return getattr(execution, "kill_reason", None) == "timeout"
    outcomes = (report.get("checks") or {}).values()
    return (report.get("why") == "pytest ran out of time"
            or any(o.get("why") == "pytest ran out of time" for o in outcomes)
            or (not report.get("exited_early")
                and any(str(o.get("why", "")).startswith("no answer (") for o in outcomes)))


def no_pytest(domain, task: dict[str, Any], sandbox) -> str:
    """Why pytest checks cannot run, saying what to do: name an environment (a row without one),
    build it with pytest, or validate a docker image on docker."""
    name = domain.environment_of(task)
    if task.get("image") and sandbox.name != "docker":
        return (f"pytest checks cannot run: the task's environment has no pytest (it names docker "
                f"image {task['image']!r}: validate it with --sandbox docker)")
    if name is None:
        return ("pytest checks cannot run: the task names no environment and the sandbox's Python "
                "has no pytest; build one (`flywheel env build NAME --requirements FILE`, pytest and "
                "the project's dependencies) and name it in the row (`environment`) or give every "
                "row one with --environment NAME")
    return (f"pytest checks cannot run: environment {name!r} has no pytest; add pytest to its "
            f"requirements and rebuild it (`flywheel env build {name} --requirements FILE`)")


def check_repo_tasks(tasks: list[dict[str, Any]], progress, backend: str = "local",
                     workers: int = 4) -> list[str]:
    """Every repository task of `tasks` run in sandbox `backend` (repo_problems), `workers` at a
    time, as "source: task ID: problem" strings in the tasks' order; `progress(line)` hears of
    each task as it starts."""
    repo = [t for t in tasks if isinstance(get_domain(t["domain"]), RepoDomain)]
    if not repo:
        return []
    try:
        sandbox = get_backend(backend, **({"warm": False} if backend == "local" else {}))
    except SandboxError as e:
        return [f"repository tasks cannot be run here (--no-run skips it): {e}"]

    def problems_of(numbered) -> list[str]:
        n, task = numbered
        progress(f"[{n}/{len(repo)}] running {task['task_id']} in the sandbox")
        return [f"{task['source']}: task {task['task_id']}: {p}" for p in repo_problems(task, sandbox)]

    with sandbox, ThreadPoolExecutor(max(1, workers)) as pool:  # the pool ends before the sandbox
        return [p for found in pool.map(problems_of, enumerate(repo, 1)) for p in found]
