"""The `harbor_reward` verifier: the reward is what the task's tests/test.sh wrote, read as Harbor
reads it, judged here from the text the harness (harnesses/harbor.py) returned.

- `/logs/verifier/reward.json` first (as Harbor's verifier does), else `reward.txt`.
- reward.txt: one number (`1`, `0`, `0.75`), surrounding whitespace allowed.
- reward.json: an object of names to numbers (Harbor's VerifierResult rewards). The reward is
  its `reward` entry when it has one, else the mean of its entries; every entry is kept as a
  component `reward:<name>`.
- A reward outside [0, 1] is clipped into it (RL here learns from [0, 1]); the verdict is pass
  only at 1.
- No reward file (RewardFileNotFoundError), an empty one (RewardFileEmptyError), one that is not
  a number or such an object, or larger than 4 KB (VerifierOutputParseError): reward 0, verdict
  fail, the error's name as a component `error:<Name>` and in the detail with test.sh's exit
  status and the tail of its output. A model that breaks the tests earns what a wrong answer
  earns, never a row left out of training.
- The harness not reporting (the sandbox failed, the task's image missing): verdict error.
"""

from __future__ import annotations

import json
import math
from typing import Any

from flywheel.families.harbor.harbor import REPORT_MARKER
from flywheel.verifiers import Verdict, register_verifier
from flywheel.verifiers.scoring import harness_report


class RewardError(ValueError):
    def __init__(self, kind: str, why: str):
        super().__init__(why)
        self.kind = kind


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RewardError("VerifierOutputParseError", f"{where} is not a finite number: {value!r}"[:200])
    return float(value)


def parse_reward(reward_json: str | None, reward_txt: str | None) -> tuple[float, dict[str, float]]:
    """(reward before clipping, components) from the files' text; RewardError when none holds one."""
    if reward_json is not None:
        try:
            data = json.loads(reward_json)
        except ValueError as e:
            raise RewardError("VerifierOutputParseError", f"reward.json is not JSON: {e}") from None
        if not isinstance(data, dict) or not data:
            raise RewardError("VerifierOutputParseError" if data else "RewardFileEmptyError",
                              "reward.json must be a non-empty object of names to numbers")
        values = {str(k): _number(v, f"reward.json's {k!r}") for k, v in data.items()}
        reward = values["reward"] if "reward" in values else sum(values.values()) / len(values)
        return reward, {f"reward:{k}": v for k, v in values.items()}
    if reward_txt is not None:
        text = reward_txt.strip()
        if not text:
            raise RewardError("RewardFileEmptyError", "reward.txt is empty")
        try:
            value = float(text)
        except ValueError:
            raise RewardError("VerifierOutputParseError", f"reward.txt is not a number: {text[:80]!r}") from None
        return _number(value, "reward.txt"), {}
    raise RewardError("RewardFileNotFoundError",
                      "test.sh wrote neither /logs/verifier/reward.json nor reward.txt")


@register_verifier("harbor_reward", "1")
def harbor_reward(task: dict, response: str, execution: Any = None) -> Verdict:
    report, problem, flags = harness_report(execution, REPORT_MARKER)
    if report is None or report.get("environment_error"):
        detail = (report or {}).get("environment_error") or problem
        return Verdict(0.0, "error", {"environment_error": 1.0}, detail=detail[:500])
    tests = report.get("verifier") or {}
    status = ("timed out" if tests.get("timed_out") else f"exit {tests.get('exit_code')}")
    try:
        if tests.get("too_big"):
            raise RewardError("VerifierOutputParseError", "a reward file is over 4 KB")
        raw, components = parse_reward(tests.get("reward_json"), tests.get("reward_txt"))
    except RewardError as e:
        log = (tests.get("log") or "")[-300:]
        return Verdict(0.0, "fail", {f"error:{e.kind}": 1.0, "reward": 0.0},
                       detail=f"{e.kind}: {e} (test.sh {status}); {log}"[:800])
    reward = min(max(raw, 0.0), 1.0)
    components = {"reward": reward, "reward_raw": raw, **components}
    if flags:  # a forged report line: something besides the harness wrote to its stdout
        components.update({f"exploit_{f}": 1.0 for f in flags})
        return Verdict(0.0, "fail", components, True, f"exploit suspected: {', '.join(flags)}")
    return Verdict(reward, "pass" if reward >= 1.0 else "fail", components,
                   detail=f"test.sh {status}, reward {raw:g}")
