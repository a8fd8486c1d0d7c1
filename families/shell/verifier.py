"""The `shell_state` verifier: the files a script left behind, not what it printed.

The sandbox harness (families/shell/harnesses/shell.py) recorded each variant directory's end state
after the script and everything it started were gone; here every expected path is checked
against it. A variant passes when all its checks hold; the reward is the fraction of hidden
variants passed (of all variants when there are none), per-check results are components.
"""

from __future__ import annotations

from typing import Any

from flywheel.families.shell.shell_state import REPORT_MARKER, check, script_of
from flywheel.verifiers import Verdict, register_verifier
from flywheel.verifiers.hacks import shell_flags
from flywheel.verifiers.scoring import harness_report, score_cases


def _already_done(task: dict, want: dict, start: dict) -> bool:
    """The variant's starting files pass its checks: an empty script would pass it."""
    files = {path: {"type": "file", "content": text} for path, text in start.items()
             if isinstance(text, str)}
    if task.get("only_listed") and any(path not in want for path in files):
        return False
    return all(check(files.get(path), text, bool(task.get("exact"))) for path, text in want.items())


@register_verifier("shell_state", "1")
def shell_state(task: dict, response: str, execution: Any = None) -> Verdict:
    expects = [task["expect"], *(v["expect"] for v in task.get("hidden_variants", []))]
    names = ["visible_0"] + [f"hidden_{i}" for i in range(len(expects) - 1)]
    flags = shell_flags(script_of(response))
    report, problem, more_flags = harness_report(execution, REPORT_MARKER)
    if report is None:
        return score_cases({n: False for n in names}, set(names[1:]), flags + more_flags, problem)
    variants = report.get("variants") or []
    if len(variants) != len(expects):
        raise ValueError(f"the harness reported {len(variants)} variants, the task has {len(expects)}")
    results, checks = {}, {}
    for name, want, got in zip(names, expects, variants):
        files = got.get("files") or {}
        ok = {path: check(files.get(path), text, bool(task.get("exact"))) for path, text in want.items()}
        if task.get("only_listed"):
            ok["(no other files)"] = all(p in want or e["type"] == "dir" for p, e in files.items())
        checks.update({f"{name}:{path}": float(v) for path, v in ok.items()})
        results[name] = all(ok.values()) and not got.get("capped")
    # A variant whose files already are as expected is passed by doing nothing: it counts only
    # for a script that also passes a variant where there was something to do.
    starts = [task["files"], *(v["files"] for v in task.get("hidden_variants", []))]
    idle = {name for name, want, start in zip(names, expects, starts) if _already_done(task, want, start)}
    passed = {name for name, ok in results.items() if ok}
    if passed and passed <= idle:
        return score_cases({n: False for n in names}, set(names[1:]), flags + more_flags,
                           "passes only variants where there was nothing to do",
                           extra={"trivial_baseline": 1.0})
    failed = [k for k, v in checks.items() if not v]
    return score_cases(results, set(names[1:]), flags + more_flags, "failed: " + ", ".join(failed[:5]) if failed else "",
                       extra=checks)
