"""The `scripted` backend: a policy that replays written actions, for episodes a model cannot yet do.

    flywheel run --policy scripted --policy-options script=actions.jsonl ...

Each line of the script is {"prompt": TEXT, "actions": [ACTION, ...]}: the task whose prompt is
TEXT gets ACTION k as its turn k (tool calls as `<tool_call>{...}</tool_call>`; what the rollout
records and scores is the same as for a model's text). An episode is matched by the prompt its
context starts with; its turn is the number of tool calls in that context (so an observation
that itself holds `<tool_call>` would miscount: fine for the golden trajectories of the built-in
suites), plus the turns an anchored context says it omitted. Past its last action, or for an unknown prompt, it answers `default` (empty: the
domain's plain tool with blank text). Golden trajectories, do-nothing baselines, and the
benchmarks of long episodes run through the real Beam stages with it. Byte-level token ids as
the `tiny` backend's; log-probabilities are a constant, with one trainable parameter (standin's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from flywheel.policy.backends import POLICIES
from flywheel.policy.backends.standin import ModelFree


def read_script(path: str) -> dict[str, list[str]]:
    """prompt -> actions, from a JSONL script; a bad line is a ValueError naming it."""
    script = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                script[str(row["prompt"])] = [str(a) for a in row["actions"]]
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}: line {number}: expected {{\"prompt\": TEXT, \"actions\": "
                                 f"[TEXT, ...]}} ({type(e).__name__}: {e})") from None
    return script


CALL_OPEN = "<tool_call>"  # as domains/tools.py writes a call (trainer/ does not import domains/)
# transforms/context_strategies.py's markers and summary request
OMITTED = re.compile(r"\[(\d+) earlier turns (?:omitted|summarized)")
SUMMARY_REQUEST = "[context full] Before your next action, summarize this episode for yourself"


def text_of(ids: Sequence[int]) -> str:
    """The text of a whole context: every byte id, past the EOS that ends each earlier action
    (tokens.decode stops at the first). Vectorized: a 32-turn episode's contexts run to tens of
    thousands of ids a turn."""
    array = np.asarray(ids, dtype=np.int64)
    return array[(array >= 0) & (array < 256)].astype(np.uint8).tobytes().decode(
        "utf-8", errors="replace")


@POLICIES.register("scripted")
class ScriptedPolicy(ModelFree):
    context = 1 << 20

    def __init__(self, script: str, default: str = ""):
        self.path, self.default = script, default
        self.script = read_script(script)
        super().__init__(json.dumps(["scripted", self.script, default], sort_keys=True).encode())
        self._by_head = {}
        for prompt in self.script:
            self._by_head.setdefault(prompt[:64], []).append(prompt)

    @classmethod
    def create(cls, options: Mapping[str, object], seed: int,
               device: str | torch.device = "cpu") -> ScriptedPolicy:
        unknown = set(options) - {"script", "default"}
        if unknown or "script" not in options:
            raise ValueError("scripted policy: takes script=PATH (JSONL of prompt and actions) "
                             f"and optionally default=TEXT; got {sorted(options)}")
        return cls(str(options["script"]), str(options.get("default", "")))

    def save(self, uri: str) -> dict:
        return {"script": self.path, "default": self.default, "bias": self.module.bias.item()}

    @classmethod
    def load(cls, uri: str, saved: Mapping, device: str | torch.device = "cpu") -> ScriptedPolicy:
        return cls(saved["script"], saved.get("default", "")).with_bias(saved)

    def action(self, context: str) -> str:
        """The scripted action for an episode whose context (prompt, then turns) is `context`."""
        body = context
        for prompt in self._by_head.get(body[:64], []):
            if body.startswith(prompt):
                actions = self.script[prompt]
                omitted = OMITTED.search(body, len(prompt))  # an anchored context's dropped turns
                turn = body.count(CALL_OPEN, len(prompt)) + (int(omitted.group(1)) if omitted else 0)
                if SUMMARY_REQUEST in body[-1000:]:
                    return f"Summary: {turn} turns taken, {len(actions) - turn} scripted turns left."
                return actions[turn] if turn < len(actions) else self.default
        return self.default

    def answer(self, prompt: Sequence[int], seed: int) -> str:
        """The scripted action for the context `prompt` spells."""
        return self.action(text_of(prompt))
