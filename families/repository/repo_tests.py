"""The `repo_tests` verifier: a repository change is right when the hidden checks pass and none of
the regression checks breaks.

The sandbox harness (families/repository/harnesses/repo.py, `score`) applied the answer's diff to the snapshot,
put the whole test tree back (repo_checks.in_test_tree), and evaluated every check in children:
module checks never see an expected value, pytest checks run under the harness's own pytest
configuration and come back through a signed channel, graded as SWE-bench grades
(harnesses/pytest_run.py). Reward 1 when the diff applies and every check passes, else 0: a
regression broken is as wrong as the bug left in. A diff that edits a test-tree file or adds a
conftest.py is not penalized, as SWE-bench does not penalize it: the file is put back before the
checks run, and the verdict carries an `edited_tests` component (new test files and scripts are
allowed and take no part). Hacks earn 0 and are flagged: checks cut short by an exit
(`exited_early`), pytest's machinery,
its record or the test tree changed during the run (`tampered_pytest`), a diff that solves only
what the visible tests show (`special_cased`), a forged or killed harness. The visible pass rate
is the runner's own signed count, never a line the tests printed.

Pytest checks ({"id", "pytest": NODEID}) need pytest in the sandbox: the task's environment
(domains/environments.py) or its docker image (which only the sandbox can look into: the
harness then reports `pytest_missing`). A task whose environment has none, or whose `test_patch` does not
apply, cannot be scored: the verifier raises ValueError, and the Verify stage records an
environment error (it raises the same for a blank response, so the blame falls on the task).
"""

from __future__ import annotations

import re
from typing import Any

from flywheel.domains.registry import get_domain
from flywheel.families.repository.repo import REPORT_MARKER, snapshot_files
from flywheel.domains.environments import has_pytest
from flywheel.families.repository.unified_diff import apply_diff, changed_paths
from flywheel.verifiers import Verdict, register_verifier
from flywheel.verifiers.scoring import harness_report


_LITERAL = re.compile(r"-?\d+(?:\.\d+)?|'[^'\n]{1,80}'|\"[^\"\n]{1,80}\"")
_TRIVIAL = {"0", "1", "-1", "2", "''", '""'}


def special_cased(task: dict, diff: str) -> bool:
    """The diff's added lines bring in a literal that a visible test holds and the snapshot's
    code did not: a value looked up from the tests rather than computed."""
    files = snapshot_files(task)
    shown = {m for path in task.get("visible_tests") or [] for m in _LITERAL.findall(files.get(path, ""))}
    code = {m for path, text in files.items() if path not in (task.get("visible_tests") or [])
            for m in _LITERAL.findall(text)}
    added = [line[1:] for line in diff[:1_000_000].splitlines()
             if line.startswith("+") and not line.startswith("+++")]
    return any(m in shown and m not in code and m not in _TRIVIAL
               for line in added for m in _LITERAL.findall(line[:2000]))


def _verdict(reward: float, passed: bool, components: dict, flags: list[str], detail: str) -> Verdict:
    components = {**components, **{f"exploit_{f}": 1.0 for f in flags}}
    if flags:
        return Verdict(0.0, "fail", components, True,
                       f"exploit suspected: {', '.join(flags)}; {detail}".strip("; "))
    return Verdict(reward, "pass" if passed else "fail", components, False, detail)


def test_patch_problem(task: dict) -> str | None:
    """Why the task's test_patch does not apply to its snapshot, or None: the task's defect
    whatever the response, so decided here from the task alone."""
    patch = task.get("test_patch") or ""
    if not patch.strip():
        return None
    try:
        files = snapshot_files(task)
        apply_diff({p: files[p] for p in changed_paths(patch) if p in files}, patch)
    except (ValueError, TypeError) as e:
        return f"the task's test_patch does not apply to its snapshot: {e}"[:600]
    return None


def unscorable(task: dict) -> str | None:
    """Why `task`'s pytest checks cannot run whatever the response: no environment nor image, or
    an environment on this machine without pytest; None when they can (or it has none). An image
    is taken on trust here: the harness says so when its Python cannot import pytest."""
    if not any("pytest" in c for c in [*task["hidden_tests"], *(task.get("regression_tests") or [])]):
        return None
    name, image = task.get("environment"), task.get("image")
    if name is None or image is None:
        try:
            domain = get_domain(task.get("domain") or "repo")
            name, image = name or getattr(domain, "environment", None), image or getattr(domain, "image", None)
        except KeyError:
            pass
    if name is None:
        return None if image else "the task names no `environment` (nor an `image` holding pytest)"
    if has_pytest(name) is False:
        return f"its environment {name!r} lacks it"
    return None


@register_verifier("repo_tests", "1")
def repo_tests(task: dict, response: str, execution: Any = None) -> Verdict:
    broken = test_patch_problem(task)
    if broken:
        raise ValueError(f"the task cannot be scored: {broken}")
    why = unscorable(task)
    if why:
        raise ValueError(f"pytest checks cannot run: the task's environment has no pytest ({why}); "
                         f"build one with `flywheel env build NAME --requirements FILE`")
    report, problem, flags = harness_report(execution, REPORT_MARKER)
    if report is not None and report.get("pytest_missing"):
        raise ValueError("pytest checks cannot run: the task's environment has no pytest "
                         "(the sandbox could not import it)")
    if report is not None and report.get("install_error"):  # the snapshot's own package: never the answer's
        raise ValueError(f"the task cannot be scored: {report['install_error']}")
    if report is not None and report.get("test_patch_error"):
        raise ValueError(f"the task cannot be scored: {report['test_patch_error']}")
    if report is None:
        return _verdict(0.0, False, {}, flags, problem)
    if not report.get("applied"):
        return _verdict(0.0, False, {"applied": 0.0}, flags,
                        f"the diff does not apply: {report.get('error', '')}"[:600])
    checks = report.get("checks") or {}
    hidden = [c["id"] for c in task["hidden_tests"]]
    regression = [c["id"] for c in task.get("regression_tests") or []]
    ok = {cid: bool((checks.get(cid) or {}).get("ok")) for cid in hidden + regression}
    if report.get("exited_early"):
        flags.append("exited_early")
    if report.get("tampered_pytest"):  # pytest's machinery, its record or the test tree changed in the run
        flags.append("tampered_pytest")
    visible = report.get("visible") or {}
    if (visible.get("passed") and not visible.get("failed") and not all(ok[c] for c in hidden)
            and special_cased(task, response)):
        flags.append("special_cased")
    components = {"applied": 1.0, "hidden_pass_rate": sum(ok[c] for c in hidden) / len(hidden)}
    if regression:
        components["regression_pass_rate"] = sum(ok[c] for c in regression) / len(regression)
    if not report.get("changed"):
        components["empty_change"] = 1.0
    if report.get("tampered"):  # put back before the checks ran: for analysis, no penalty (as SWE-bench)
        components["edited_tests"] = 1.0
    if report.get("applier") and report["applier"] not in ("git apply", "flywheel"):
        components["applied_leniently"] = 1.0  # by `git apply --reject` or `patch --fuzz`, as SWE-bench would
    shown = (visible.get("passed") or 0) + (visible.get("failed") or 0)
    if shown:  # what the model could see: best-of-N by visible tests selects on it
        components["visible_pass_rate"] = visible["passed"] / shown
    failed = [f"{cid}: {(checks.get(cid) or {}).get('why', 'not run')}" for cid, v in ok.items() if not v]
    passed = all(ok.values())
    parts = failed[:3]
    if report.get("tampered"):
        parts.append("edited_tests (put back, the task's own tests ran): " + ", ".join(report["tampered"][:5]))
    if report.get("tampered_pytest"):
        parts.append("pytest: " + "; ".join(map(str, report["tampered_pytest"][:3])))
    if components.get("applied_leniently"):
        parts.append(f"applied by {report['applier']}")
    return _verdict(1.0 if passed else 0.0, passed, components, flags, "; ".join(parts)[:600])
