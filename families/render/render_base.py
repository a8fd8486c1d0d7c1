"""The render domains' common part: a response is code that draws; the sandbox renders it and
the task's reference program (families/render/harnesses/render.py), the `render` verifier compares them.

Task fields: prompt, `route` ("matplotlib" default, "svg" or "scene3d"), `reference_code` (the
program whose render is the target) or, for charts, `reference_spec` (a chart spec that
chart_specs.py turns into the reference program), optional `source_code` (an edit task's
starting program: a response must be closer to the reference than to it to earn anything),
optional `bounds` (scene3d: the view spans
-bounds..bounds, default 4) and `environment` (the mounted packages, default `render`: see
render_environment.py). A user's row needs only prompt and reference_code (or reference_spec):

    {"domain": "chart_to_code", "prompt": "Plot ...", "reference_code": "import matplotlib..."}
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from flywheel.domains.domain import Domain, SandboxNeeds
from flywheel.families.render.render_environment import ENVIRONMENT
from flywheel.sandbox import SandboxError
from flywheel.domains.environments import ENV_MOUNT, environment_dir, environment_problem
from flywheel.domains.untrusted_text import parse_python

_HERE = Path(__file__).resolve().parent / "harnesses"
FILES = {"harness.py": (_HERE / "render.py").read_text(),
         **{name: (_HERE / name).read_text() for name in ("render_figure.py", "render_draw.py", "scene3d.py")}}
REPORT_MARKER = "FLYWHEEL-RENDER "  # starts the harness's report line; the verifier looks for it
ROUTES = ("matplotlib", "svg", "scene3d")
MAX_CODE = 50_000
_FENCE = re.compile(r"```[ \t]*+(?:python3?|py)?[ \t]*+\n(.*?)```", re.S | re.I)


def code_of(response: str) -> str:
    """The program of a response: its last ```python block, else the whole text."""
    blocks = _FENCE.findall(response)
    return (blocks[-1] if blocks else response).strip() + "\n"


def route_of(task: dict) -> str:
    return task.get("route") or "matplotlib"


def fenced(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


def missing_environment(name: str, folder: str) -> str:
    """What to do when environment `name` is not at `folder`."""
    return (f"the render domains need environment {name!r} (matplotlib, numpy, pillow) at "
            f"{folder}: `flywheel env build {name} --requirements FILE`, or "
            "render_environment.copy_installed() offline (or set FLYWHEEL_ENVIRONMENTS)")


class RenderDomain(Domain):
    """Tasks whose answer is a program that draws; scored by `render` against the reference."""

    verifier = "render"
    report_marker = REPORT_MARKER
    required_fields = ("task_id", "prompt", "reference_code")
    max_new_tokens = 400
    tier = 2
    budget_s = 8.0  # the harness's: half to run the reference, half the response
    # Beyond it: matplotlib's import (about 1 s, more under load), up to 2 s to draw each SVG or
    # scene the programs described, and an edit task's source program (a quarter of the budget).
    sandbox = SandboxNeeds(language="python (matplotlib, Agg)", files=tuple(FILES) + ("solution.py",),
                           timeout_s=budget_s + 12.0, memory_mb=1024)

    def normalize_task(self, row: dict) -> dict:
        task = dict(row)
        if not task.get("reference_code") and "reference_spec" in task:
            from flywheel.families.render.chart_specs import chart_code, spec_problems
            if not spec_problems(task["reference_spec"]):
                task["reference_code"] = chart_code(task["reference_spec"])
        task.setdefault("route", "matplotlib")
        code = task.get("reference_code")  # validate_task says what is wrong with one not text
        task.setdefault("answer", fenced(code if isinstance(code, str) else ""))
        return task

    def validate_task(self, task: dict) -> list[str]:
        problems = super().validate_task(task)
        if not task.get("reference_code") and "reference_spec" in task:
            from flywheel.families.render.chart_specs import spec_problems
            return [p for p in problems if "reference_code" not in p] + spec_problems(task["reference_spec"])
        code = task.get("reference_code")
        if "reference_code" in task and not (isinstance(code, str) and code.strip()):
            problems.append("field `reference_code` must be a non-empty Python program")
        elif isinstance(code, str) and len(code) > MAX_CODE:
            problems.append(f"field `reference_code` is longer than {MAX_CODE} characters")
        elif isinstance(code, str) and parse_python(code) is None:
            problems.append("field `reference_code` is not valid Python")
        if route_of(task) not in ROUTES:
            problems.append(f"field `route` must be one of {', '.join(ROUTES)}, got {task.get('route')!r}")
        bounds = task.get("bounds")
        if bounds is not None and not (isinstance(bounds, (int, float)) and 0.5 <= bounds <= 100):
            problems.append("field `bounds` must be a number between 0.5 and 100")
        if task.get("environment") is not None:
            problems += [p for p in [environment_problem(task["environment"])] if p]
        return problems

    def demonstration(self, task: dict, rng) -> str:
        return fenced(task["reference_code"])

    def preflight(self, sandbox_backend: str) -> str | None:
        folder = environment_dir(ENVIRONMENT)
        if not os.path.isdir(folder):
            return missing_environment(ENVIRONMENT, folder)
        if sandbox_backend == "local":
            from flywheel.sandbox.backends.local import UNREACHABLE, reachable_by_sandbox
            if not reachable_by_sandbox(folder):
                return f"environment {ENVIRONMENT!r} at {folder}: {UNREACHABLE}"
        return None

    def program(self, task: dict, response: str, marker: str = REPORT_MARKER) -> dict:
        route = route_of(task)
        plan = {"route": route, "reference_code": task["reference_code"], "marker": marker,
                "bounds": task.get("bounds"), "source_code": task.get("source_code")}
        name = task.get("environment") or ENVIRONMENT
        folder = environment_dir(name)
        if not os.path.isdir(folder):  # an environment error row naming the fix, not a 0
            raise SandboxError(missing_environment(name, folder))
        mounts = [[folder, ENV_MOUNT]]
        limits = {**self.sandbox.limits(), "output_bytes": 1 << 19, "processes": 64}
        return {"files": {**FILES, "solution.py": code_of(response)},
                "command": ["python", "harness.py", route, str(self.budget_s)],
                "stdin": json.dumps(plan), "limits": limits, "mounts": mounts}
