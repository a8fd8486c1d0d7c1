"""What the sandbox-side harnesses report, and how case results become a Verdict.

Shared by the verifiers that run a harness (python_tests, sql_result, shell_state). The rules:
- reward is the fraction of hidden cases passed when the task has hidden cases (visible ones were
  shown to the policy, so passing them proves little), else of all cases; a verifier counts as
  visible whatever the prompt gave away (python_tests: a hidden case equal to a shown example),
  and flags a response that only echoes shown examples, so that these visible-only rewards never
  pay a lookup table;
- the verdict is pass only when every case passes;
- a response flagged as a suspected exploit scores 0 and fails, whatever it passed.
"""

from __future__ import annotations

from flywheel.domains.report_channel import harness_report  # noqa: F401 (verifiers import it from here)
from flywheel.verifiers import Verdict


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
