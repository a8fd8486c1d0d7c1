"""Drawing a run's render attempts again: the pixels a report shows beside their targets.

Trajectory rows keep an attempt's response and reward, not its pixels (the render harness's
report is longer than the observation a row stores), so `render_again` runs each chosen row's
program once more in a sandbox, whose harness draws the task's reference beside it, and returns
both 128 x 128 PNGs (base64) with the verdict. Generated tasks are rebuilt from their task_id
(`DOMAIN-SPLIT-INDEX`) and the run's seed; tasks from users' files come in `tasks`.
reports/render_panel.py turns the result into HTML.
"""

from __future__ import annotations

import re

from flywheel.domains.registry import all_domains, get_domain
from flywheel.families.render.render_base import REPORT_MARKER
from flywheel.domains.report_channel import harness_report
from flywheel.verifiers import get_verifier

_TASK_ID = re.compile(r"(?P<domain>.+)-(?P<split>train|heldout)-(?P<index>\d+)")


def render_domains() -> set[str]:
    """The registered domains scored by the `render` verifier."""
    return {name for name, d in all_domains().items() if d.verifier == "render"}


def task_of(task_id: str, seed: int, tasks: dict | None = None) -> dict | None:
    """The task a row was sampled from: from `tasks`, else rebuilt from a generated task's id."""
    if tasks and task_id in tasks:
        return tasks[task_id]
    match = _TASK_ID.fullmatch(task_id or "")
    if not match or match["domain"] not in render_domains():
        return None
    return get_domain(match["domain"]).make_task(match["split"], int(match["index"]), seed)


def render_again(rows: list[dict], backend, seed: int, tasks: dict | None = None) -> list[dict]:
    """For each row (domain, task_id, response, reward_raw) whose task is known: the row with
    `target_png`, `response_png` (base64 or None), `now` (the verdict of this run)."""
    out = []
    for row in rows:
        task = task_of(row.get("task_id"), seed, tasks)
        if task is None:
            continue
        domain, response = get_domain(task["domain"]), row.get("response") or ""
        execution = domain.run(backend, task, response)
        report = harness_report(execution, REPORT_MARKER)[0] or {}
        png = lambda part: report[part].get("png") if isinstance(report.get(part), dict) else None  # noqa: E731
        out.append({**row, "target_png": png("reference"), "response_png": png("response"),
                    "now": get_verifier(domain.verifier)(task, response, execution)})
    return out


def open_backend(name: str = "local", **options):
    """A sandbox backend to draw with (a context manager)."""
    from flywheel.sandbox import get_backend
    return get_backend(name, **options)
