"""What the sandbox-side harnesses report, and how case results become a Verdict.

Shared by the verifiers that run a harness (python_tests, sql_result, shell_state). The rules:
- reward is the fraction of hidden cases passed when the task has hidden cases (visible ones were
  shown to the policy, so passing them proves little), else of all cases;
- the verdict is pass only when every case passes;
- a response flagged as a suspected exploit scores 0 and fails, whatever it passed.
"""

from __future__ import annotations

import json
from typing import Any

from flywheel.domains.report_channel import FORGED
from flywheel.verifiers import Verdict


def harness_report(execution: Any, marker: str) -> tuple[dict | None, str, list[str]]:
    """(report, problem, flags): the harness's last report line, or None and why there is none.

    Only the harness writes to the sandbox's stdout, and it writes its one report last, then exits
    0; anything else means it did not finish. A line the run's nonce did not sign (FORGED, see
    domains/report_channel.py) is never a report. Killed by a signal that no limit explains means the
    untrusted code killed it, and more than one report line means something forged one: flagged.
    """
    if execution is None:
        raise ValueError("this verifier needs the sandbox's execution result")
    all_lines = execution.stdout.splitlines()
    lines = [line for line in all_lines if line.startswith(marker)]
    forged = len(lines) > 1 or any(line.startswith(FORGED + marker) for line in all_lines)
    flags = ["forged_report"] if forged else []  # the harness prints exactly one, last
    if lines and execution.exit_code == 0 and not execution.kill_reason:
        report = json.loads(lines[-1][len(marker):])
        if isinstance(report, dict):
            return report, "", flags
    reason = execution.kill_reason or f"exit code {execution.exit_code}"
    flags += ["killed_harness"] if execution.kill_reason == "signal" else []
    return None, f"the harness did not report ({reason}): {execution.stderr[-300:]}", flags


def score_cases(results: dict[str, bool], hidden: set[str], flags: list[str] = (),
                detail: str = "", extra: dict[str, float] | None = None) -> Verdict:
    """A Verdict from per-case results (name -> passed); `hidden` names the hidden cases."""
    visible = [ok for name, ok in results.items() if name not in hidden]
    secret = [ok for name, ok in results.items() if name in hidden]
    flags = list(flags)
    if visible and secret and all(visible) and not any(secret):
        flags.append("overfit_visible")  # right on every shown example, wrong on every hidden one
    graded = secret or visible
    reward = sum(graded) / len(graded) if graded else 0.0
    components = {name: float(ok) for name, ok in results.items()}
    if visible:
        components["visible_pass_rate"] = sum(visible) / len(visible)
    if secret:
        components["hidden_pass_rate"] = sum(secret) / len(secret)
    components.update(extra or {})
    components.update({f"exploit_{flag}": 1.0 for flag in flags})
    passed = bool(results) and all(results.values()) and not flags
    if flags:
        reward, detail = 0.0, f"exploit suspected: {', '.join(flags)}; {detail}"
    return Verdict(reward, "pass" if passed else "fail", components, bool(flags), detail.strip("; "))
