"""The Domain base class: a family of tasks whose outcome a program checks.

A domain is a module of a task family (families/<family>/) that subclasses Domain (or
EpisodeDomain, domains/episodes.py, for tasks worked on over several turns with tools) and
registers it with `register_domain` (domains/registry.py). SandboxNeeds says what its programs
need of the sandbox; ToolSpec is one tool a multi-turn domain offers; Step is what one action did
(SkyRL's `BaseTextEnv.step` output).
A single-turn task is the one-step episode: its `step` runs the answer's program once and ends.
Every sandbox call goes through domains/tool_runner.py.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from flywheel.domains.report_channel import signed
from flywheel.domains.tool_runner import ToolRunner, cut_output
from flywheel.sandbox import ExecRequest, ExecResult, Limits

SPLITS = ("train", "heldout")
SUBMITTED = "submitted"
OUTPUT_CHARS = 2000  # a single-turn attempt's observation: the tail of its output
KEY_CHARS = 200      # an answer key's length at most (`short_key`)


def short_key(text: str) -> str | None:
    """`text` as an answer key: itself when short and valid UTF-8; else its start (lone surrogates
    replaced) and a hash of all of it, so long answers still vote apart; None for empty text."""
    if not text:
        return None
    raw = text.encode("utf-8", "surrogatepass")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:  # lone surrogates: a table cannot store them
        pass
    else:
        if len(text) <= KEY_CHARS:
            return text
    start = text[:KEY_CHARS - 24].encode("utf-8", "replace").decode("utf-8")
    return f"{start}...#{hashlib.sha256(raw).hexdigest()[:16]}"


@dataclass(frozen=True)
class SandboxNeeds:
    """What a domain's programs need from the sandbox. Its time and memory limits are every
    attempt's defaults (the one definition); a program spec's `limits` may override them per task
    (keys of `flywheel.sandbox.Limits`)."""

    language: str = "python"
    files: tuple[str, ...] = ()       # files every program of the domain writes
    timeout_s: float = 2.0
    memory_mb: int = 256

    def limits(self) -> dict[str, Any]:
        return {"timeout_s": self.timeout_s, "memory_mb": self.memory_mb}


@dataclass(frozen=True)
class ToolSpec:
    """A tool a multi-turn domain offers the policy: a name and a JSON-Schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class Step:
    """What one action did: the observation the model reads next, the state after it, whether
    the episode ended (SUBMITTED, SOLVED, ... or None) and the domain's score of the new state;
    then what the runner saw: the parsed call (None when none was made), the sandbox's result
    (None when nothing ran), and why the action or its output could not be read."""
    observation: str
    state: dict[str, Any] = field(default_factory=dict)
    done: str | None = None
    reward: float | None = None
    call: Any = None
    result: ExecResult | None = None
    tool_error: str | None = None
    output_unreadable: bool = False


class Domain:
    """A family of tasks whose outcome a program checks.

    Subclasses set `name` and `verifier` (a name in the verifier registry), and implement
    `sample_task` and `demonstration`; domains whose responses run in the sandbox set `sandbox`
    (what they need of it) and implement `program`.
    Tasks are plain dicts: task_id, domain, prompt, answer (a string the verifier reads), split,
    plus whatever fields the domain's verifier reads (`required_fields`).
    Tasks come from a seeded generator (`sample_task`) or, in `DatasetDomain`, from a file.
    """

    name: str = ""
    verifier: str = ""
    description: str = ""
    heldout_fraction: float = 0.2
    max_new_tokens: int = 12
    tier: int = 1                                   # budget class: 0 core, 1 standard, 2 extra
    prompt_template: str = "{prompt}"               # how `render_prompt` turns fields into text
    sandbox: SandboxNeeds | None = None             # None: nothing runs in the sandbox
    tools: tuple[ToolSpec, ...] = ()                # multi-turn domains: the tools they offer
    report_marker: str | None = None                # its harness's report line starts with it
    required_fields: tuple[str, ...] = ("task_id", "prompt", "answer")

    @property
    def uses_sandbox(self) -> bool:
        return self.sandbox is not None

    def task_count(self) -> int | None:
        """How many tasks the domain holds; None when a generator draws them."""
        return None

    def render_prompt(self, fields: dict[str, Any]) -> str:
        return self.prompt_template.format(**fields)

    def normalize_task(self, row: dict[str, Any]) -> dict[str, Any]:
        """A user's task row as this domain's task dict (defaults filled in, e.g. MBPP's prompt)."""
        return dict(row)

    def validate_task(self, task: dict[str, Any]) -> list[str]:
        """Every problem that makes `task` unusable by this domain, as "field `x` ..." strings."""
        problems = []
        for name in self.required_fields:
            if name not in task or task[name] is None:
                problems.append(f"field `{name}` missing")
            elif name in ("task_id", "prompt") and not (isinstance(task[name], str) and task[name]):
                problems.append(f"field `{name}` must be a non-empty string")
        return problems

    def describe(self) -> dict[str, Any]:
        """The row `flywheel domains` prints."""
        count = self.task_count()
        tasks = "generated" if count is None else count or "your files"
        return {"name": self.name, "tier": self.tier, "verifier": self.verifier, "tasks": tasks,
                "sandbox": self.sandbox.language if self.sandbox else None,
                "tools": [t.name for t in self.tools], "description": self.description}

    def preflight(self, sandbox_backend: str) -> str | None:
        """Why this domain's attempts cannot run on this machine with `sandbox_backend` (e.g. a
        folder its sandbox mounts is missing or unreachable), or None. Checked before a local run
        or evaluation starts (loop/preflight.py): a setup mistake then costs a second, not a
        rollout whose every attempt is an environment error row."""
        return None

    def answer_key(self, task: dict[str, Any], response: str) -> str | None:
        """The response's final answer in a canonical form, for majority voting (maj@N): two
        responses with the same key give the same answer. None where answers cannot be compared
        (code, free text) or the response has no readable answer. By default None.

        A domain that overrides it reads the answer with its verifier's own reading (never a
        second parser that could disagree), stays total and linear on hostile text, and returns
        `short_key(...)`-sized strings."""
        return None

    def sample_task(self, rng: random.Random) -> dict[str, Any]:
        """Draw one task's `prompt` and `answer` from `rng`."""
        raise NotImplementedError

    def demonstration(self, task: dict[str, Any], rng: random.Random) -> str:
        """A correct response to `task`, for the supervised warm start."""
        raise NotImplementedError

    def program(self, task: dict[str, Any], response: str, **report) -> dict[str, Any]:
        """What the sandbox runs for `response`: {"files": {path: text}, "command": [...]},
        optionally "stdin", "limits" (a dict of `Limits` fields for this task), "mounts"
        ([host dir, sandbox path] pairs, read-only: a task's environment) and "image" (the
        docker image to run in; None: the backend's default). A domain with a
        `report_marker` takes `marker=`: what its harness starts its report line with."""
        raise NotImplementedError(f"domain {self.name} does not execute code")

    def start_state(self, task: dict[str, Any]) -> dict[str, Any]:
        """The state an attempt starts from: nothing, unless an episode domain keeps some."""
        return {}

    def report(self, nonce: str) -> dict[str, str]:
        """The keyword a program builder takes for its harness's signed report line, if any."""
        return {"marker": signed(self.report_marker, nonce)} if self.report_marker else {}

    def to_request(self, spec: dict[str, Any] | None) -> ExecRequest | None:
        """The sandbox request of a program spec (as `program` returns) under the domain's limits,
        overridden by the spec's own; None for no spec. Single-turn and tool programs alike."""
        if spec is None:
            return None
        limits = Limits(**{**self.sandbox.limits(), **(spec.get("limits") or {})})
        return ExecRequest(files=spec["files"], command=tuple(spec["command"]),
                           stdin=spec.get("stdin", ""), limits=limits,
                           mounts=tuple(tuple(m) for m in spec.get("mounts") or ()),
                           image=spec.get("image"))

    def request(self, task: dict[str, Any], response: str, nonce: str = "") -> ExecRequest:
        """The sandbox request for `response`: the domain's `program`; its harness signs its
        report with `nonce`."""
        return self.to_request(self.program(task, response, **self.report(nonce)))

    def answer_step(self, task: dict[str, Any], response: str, runner: ToolRunner,
                    state: dict[str, Any] | None = None) -> Step:
        """Run the answer `response` as its program, once, and end: what Execute scores for every
        attempt (an episode's final answer included, hidden tests and all). A domain that runs
        nothing ends with nothing run."""
        if not self.uses_sandbox:
            return Step("", state or {}, SUBMITTED)
        result = runner.run(self, lambda nonce: self.request(task, response, nonce),
                            lambda nonce: self.request(task, "", nonce))
        output = "" if result is None else cut_output(result.stdout + result.stderr,
                                                      OUTPUT_CHARS, keep="tail")[0]
        return Step(output, state or {}, SUBMITTED, result=result)

    def step(self, task: dict[str, Any], state: dict[str, Any], action: str,
             runner: ToolRunner) -> Step:
        """One step of an episode (SkyRL's `BaseTextEnv.step`). A single-turn task is the
        one-step episode whose action is its answer."""
        return self.answer_step(task, action, runner, state)

    def run(self, backend, task: dict[str, Any], response: str) -> ExecResult:
        """Run `response` on sandbox `backend` as the pipeline does (one try): through the tool
        runner, under a fresh nonce, reading only the report lines that carry it."""
        return self.answer_step(task, response, ToolRunner(backend, retries=0)).result

    def split_of(self, prompt: str) -> str:
        """The seeded-independent split of a prompt: by content hash, so the same prompt can
        never be both a training and a held-out task, whatever seed or index drew it."""
        digest = hashlib.sha256(f"{self.name}\0{prompt}".encode()).digest()
        return "heldout" if digest[0] < 256 * self.heldout_fraction else "train"

    def make_task(self, split: str, index: int, seed: int) -> dict[str, Any]:
        """Task number `index` of `split`, the same for the same (seed, split, index)."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
        rng = random.Random(f"{seed}:{self.name}:{split}:{index}")
        for _ in range(10_000):
            task = self.sample_task(rng)
            if self.split_of(task["prompt"]) == split:
                break
        else:
            raise RuntimeError(f"domain {self.name}: no {split} task found in 10000 draws")
        task.update(task_id=f"{self.name}-{split}-{index:06d}", domain=self.name, split=split)
        return task
