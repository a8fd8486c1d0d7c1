"""The `python_tests` verifier: unit tests run by the sandbox harness, verdict decided here.

The harness (domains/harnesses/pytests.py) ran the task's cases in a trusted process and the
response in another; this reads its report, checks that it covers exactly the task's cases (as
computed here from the task, not from the sandbox), and scores the fraction passed.
"""

from __future__ import annotations

from typing import Any

from flywheel.domains.python_tests import REPORT_MARKER, solution_source, test_plan
from flywheel.verifiers import Verdict, register_verifier
from flywheel.verifiers.hacks import echoes_examples, python_flags
from flywheel.verifiers.scoring import harness_report, score_cases


@register_verifier("python_tests", "1")
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
    # No better than a solution that does nothing (returns a constant, or its argument): no
    # reward, whatever share of the cases that happens to pass (`return None` where some
    # expected values are None). The harness ran the tests against each such baseline.
    passed = {n for n, ok in results.items() if ok}
    trivial = next((b for b, cases in (report.get("baselines") or {}).items()
                    if passed and passed <= set(cases)), None)
    if trivial is not None:
        return score_cases({n: False for n in names}, hidden,
                           flags + more_flags + list(report.get("signals") or []),
                           f"passes no case that a solution returning {trivial} does not pass",
                           extra={"trivial_baseline": 1.0})
    failures = [f"{c['name']}: {c.get('error')}" for c in reported if not results[c["name"]]]
    shown = [c["code"] for c in cases if not c["hidden"]]
    own_code = code[len(task["prompt"]):] if code.startswith(task["prompt"]) else code
    if any(not results[n] for n in hidden) and echoes_examples(own_code, shown):
        flags.append("hard_codes_examples")  # it holds a shown example's literals and fails hidden ones
    detail = "; ".join(filter(None, [report.get("import_error"), *failures[:5]]))
    return score_cases(results, hidden, flags + more_flags + list(report.get("signals") or []), detail)
