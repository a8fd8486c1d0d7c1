"""The `python_tests` verifier: unit tests run by the sandbox harness, verdict decided here.

The harness (families/python/harnesses/pytests.py) ran the task's cases against do-nothing solutions
first, then against the response in another process; this reads its report, checks that it covers
exactly the task's cases (as computed here from the task, not from the sandbox), and scores the
fraction passed. Nothing is paid when:
- the report lacks a complete run of every do-nothing baseline (`baselines_missing`), or the
  response passes no case that one of them does not (`trivial_baseline`; flagged
  `runs_out_the_clock` when it also used up its time, the shape of starving the baselines);
- the response holds a shown example's literal inputs and output (a lookup table: the prompt's
  `>>>` examples and the like, and the visible cases) and nothing unshown proves it computes:
  it fails an unshown case, or passes only unshown cases a do-nothing solution passes too (a
  lookup table with `return []` for the rest), or the task has no unshown case
  (`hard_codes_examples`).
Hidden cases the prompt shows count as visible (families/python/python_tests.py: test_plan).
"""

from __future__ import annotations

from typing import Any

from flywheel.families.python.case_plan import shown_examples, test_plan
from flywheel.families.python.python_tests import REPORT_MARKER, baseline_passes, baseline_problem, solution_source
from flywheel.verifiers import Verdict, register_verifier
from flywheel.verifiers.hacks import echoes_examples, python_flags
from flywheel.verifiers.scoring import harness_report, score_cases


def _ran_out_of_time(report: dict) -> bool:
    """Whether the solution used up a case's time or the whole budget (or timed out importing)."""
    errors = [str(c.get("error") or "") for c in report.get("cases") or []]
    errors.append(str(report.get("import_error") or ""))
    return any("timed out" in e or "time budget exhausted" in e for e in errors)


@register_verifier("python_tests", "2")
def python_tests(task: dict, response: str, execution: Any = None) -> Verdict:
    cases = [s for s in test_plan(task)["steps"] if s["kind"] == "case"]
    names, hidden = [c["name"] for c in cases], {c["name"] for c in cases if c["hidden"]}
    code = solution_source(task, response)
    flags = python_flags(code)
    report, problem, more_flags = harness_report(execution, REPORT_MARKER)
    if report is None:
        return score_cases({n: False for n in names}, hidden, flags + more_flags, problem)
    reported = report.get("cases") or []
    if [c.get("name") for c in reported] != names:
        raise ValueError(f"the harness reported cases {[c.get('name') for c in reported]}, "
                         f"the task has {names}")
    results = {c["name"]: c.get("passed") is True for c in reported}
    flags += more_flags + [str(s) for s in report.get("signals") or []]
    unpaid = baseline_problem(report, {n for n, ok in results.items() if ok})
    if unpaid is not None:
        component, why = unpaid
        if component == "trivial_baseline" and _ran_out_of_time(report):
            flags.append("runs_out_the_clock")
        return score_cases({n: False for n in names}, hidden, flags, why, extra={component: 1.0})
    failures = [f"{c['name']}: {c.get('error')}" for c in reported if not results[c["name"]]]
    shown = [c["code"] for c in cases if not c["hidden"]] + shown_examples(task)
    given = task["prompt"] if code.startswith(task["prompt"]) else ""
    unshown = {n for n in hidden if results[n]}
    proves = unshown == hidden and not any(unshown <= cases for cases in baseline_passes(report).values())
    if not proves and echoes_examples(code, shown, given):
        flags.append("hard_codes_examples")  # a shown example's literals, and nothing unshown proves more
    detail = "; ".join(filter(None, [report.get("import_error"), *failures[:5]]))
    return score_cases(results, hidden, flags, detail)
