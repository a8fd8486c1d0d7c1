"""The tool runner: the one caller of the sandbox for every action, single-turn or episode step.

Execute, the Turn stage, `flywheel replay` and `Domain.run` all run an action through
`ToolRunner.run`, which owns what each of them once wrote for itself:

- one fresh nonce per call, kept across its retries (report_channel.py: only report lines that
  carry it are the harness's);
- building the request, with the blame rule when it cannot be built: if the same action with
  blank text on the task's start state builds, what the model wrote broke it (`Unbuildable`,
  blame "model"); if not, the task itself cannot run it (blame "input");
- retrying a failure of the sandbox itself (SandboxError) with exponential backoff, then raising
  it: an environment failure, never scored as the model's;
- reading the output: the report lines the nonce signed, and no others, read as the harness's.

`cut_output` is the one way a program's output is shortened for the model and the tables.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from flywheel.domains.report_channel import authenticate, new_nonce
from flywheel.sandbox import ExecRequest, ExecResult, SandboxError

RETRIES, BACKOFF_S = 2, 0.2  # the pipeline's defaults, for Execute and Turn alike

Build = Callable[[str], "ExecRequest | None"]  # nonce -> the request, or None: nothing to run


class Unbuildable(Exception):
    """An action that could not be made into a program: `problem` is why, `blame` whose fault it
    is ("model": the action's content; "input": the task's own defect)."""

    def __init__(self, problem: Exception, blame: str):
        super().__init__(f"{type(problem).__name__}: {problem}")
        self.problem, self.blame = problem, blame


def attempt_nonce(domain: Any) -> str:
    """A fresh nonce for one call's report, or "" for a domain whose harness reports none."""
    return new_nonce() if domain.report_marker else ""


def read_output(domain: Any, result: ExecResult, nonce: str) -> ExecResult:
    """`result` with only the report lines signed by `nonce` read as the harness's."""
    if not nonce:
        return result
    return dataclasses.replace(result, stdout=authenticate(result.stdout, domain.report_marker, nonce))


@dataclasses.dataclass(frozen=True)
class ToolRunner:
    """Runs actions on one sandbox `backend`, retrying its failures `retries` times."""

    backend: Any
    retries: int = RETRIES
    backoff_s: float = BACKOFF_S

    def run(self, domain: Any, build: Build, blank: Build | None = None) -> ExecResult | None:
        """The output of the request `build(nonce)` makes, or None when it makes none. `blank`
        builds the same action with blank text on the start state (the blame rule); without it
        a failure to build is raised as it is."""
        nonce = attempt_nonce(domain)  # one call, one nonce, however many tries
        request = self._request(build, blank, nonce)
        if request is None:
            return None
        for retry in range(self.retries + 1):
            try:
                return read_output(domain, self.backend.run(request), nonce)
            except SandboxError:
                if retry == self.retries:
                    raise
                time.sleep(self.backoff_s * 2 ** retry)

    @staticmethod
    def _request(build: Build, blank: Build | None, nonce: str) -> ExecRequest | None:
        try:
            return build(nonce)
        except SandboxError:  # what the sandbox needs is missing here (an environment): not
            raise             # the action's fault nor the task's
        except Exception as e:  # noqa: BLE001  blamed here, never raised out of a stage as is
            if blank is None:
                raise
            try:
                blank(nonce)
            except Exception:  # noqa: BLE001  the blank action fails too: the task's defect
                raise Unbuildable(e, "input") from None
            raise Unbuildable(e, "model") from None


def cut_output(text: str, limit: int, keep: str = "middle") -> tuple[str, int]:
    """(text, characters cut): at most `limit` characters. keep="middle" keeps head and tail around
    a marker saying how much was cut (errors show up at both ends of long outputs: episodes'
    observations); keep="tail" keeps the last `limit` (a single-turn attempt's output)."""
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    if keep == "tail":
        return text[cut:], cut
    marker = f"\n[... {cut} characters cut ...]\n"
    keep_chars = max(0, limit - len(marker))
    head = keep_chars // 2
    return text[:head] + marker + text[len(text) - (keep_chars - head):], cut
