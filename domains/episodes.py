"""Multi-turn episodes, the domain side: what a tool call runs, what the model observes, what is scored.

An episode's state is a small JSON-able dict that travels inside the attempt record from one turn
to the next (the files written so far, the last code tried): a turn may run on another worker than
the one before it, so nothing lives in a worker's memory or in a sandbox between turns. Each tool
call runs in a fresh sandbox built from that state.

    state = domain.start_state(task)
    call = parse_action(text, domain.tools, domain.plain_tool)        # domains/tools.py
    request = domain.tool_request(task, state, call, nonce)          # None: nothing to run
    step = domain.observe(task, state, call, result)                  # text, new state, done, reward
    ...
    domain.final_response(task, state)   # what Execute and Verify score, as for a single turn

The final score never trusts a tool's output: the episode's answer is executed and verified again
by the domain's ordinary single-turn path, hidden tests included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flywheel.domains.domain import Domain, ToolSpec
from flywheel.domains.report_channel import signed
from flywheel.domains.tools import SUBMIT, ToolCall, ToolCallError, parse_action
from flywheel.sandbox import ExecRequest, ExecResult, Limits

SUBMITTED, SOLVED, MAX_TURNS, BUDGET = "submitted", "solved", "max_turns", "budget"


@dataclass(frozen=True)
class Step:
    """What one tool call did: the observation the model reads next, the state after it, whether
    the episode ended (SUBMITTED, SOLVED or None) and the domain's score of the new state."""
    observation: str
    state: dict[str, Any] = field(default_factory=dict)
    done: str | None = None
    reward: float | None = None


class EpisodeDomain(Domain):
    """A domain whose tasks can be worked on over several turns with tools.

    Subclasses set `tools` (they always include `submit`), `plain_tool` (what a response without a
    tool call means) and `max_turns` (their default; a run's --max-turns overrides it), and
    implement `tool_program`, `observe` and `final_response`.
    """

    max_turns: int = 1
    plain_tool: str = ""
    tools: tuple[ToolSpec, ...] = (SUBMIT,)
    answer_field = "answer"           # the state key the final answer is kept under

    def start_state(self, task: dict[str, Any]) -> dict[str, Any]:
        return {}

    def tool_program(self, task: dict[str, Any], state: dict[str, Any], call: ToolCall,
                     **report) -> dict[str, Any] | None:
        """The sandbox program of `call` (as `Domain.program` returns), or None when it runs
        nothing. Takes `marker=` when the domain has a report_marker."""
        raise NotImplementedError

    def observe(self, task: dict[str, Any], state: dict[str, Any], call: ToolCall,
                result: ExecResult | None) -> Step:
        raise NotImplementedError

    def demonstration_turns(self, task: dict[str, Any], rng) -> list[tuple[str, str | None]]:
        """A demonstrated episode for the warm start: (action, the observation it gets) per turn,
        None after the last. By default the single-turn demonstration."""
        return [(self.demonstration(task, rng), None)]

    def final_response(self, task: dict[str, Any], state: dict[str, Any]) -> str:
        """The episode's answer: what the single-turn Execute and Verify score."""
        return state.get(self.answer_field, "")

    def submit(self, state: dict[str, Any], call: ToolCall) -> Step:
        return Step("submitted", {**state, self.answer_field: call.arguments["answer"]}, SUBMITTED)

    def tool_request(self, task: dict[str, Any], state: dict[str, Any], call: ToolCall,
                     nonce: str = "") -> ExecRequest | None:
        """The sandbox request of `call` under the domain's limits, or None (submit, or a tool
        that runs nothing)."""
        if call.name == SUBMIT.name:
            return None
        report = {"marker": signed(self.report_marker, nonce)} if self.report_marker else {}
        spec = self.tool_program(task, state, call, **report)
        if spec is None:
            return None
        limits = Limits(**{**self.sandbox.limits(), **(spec.get("limits") or {})})
        return ExecRequest(files=spec["files"], command=tuple(spec["command"]),
                           stdin=spec.get("stdin", ""), limits=limits)

    def step(self, task: dict[str, Any], state: dict[str, Any], call: ToolCall,
             result: ExecResult | None) -> Step:
        """Submit ends the episode; any other tool is the domain's `observe`."""
        if call.name == SUBMIT.name:
            return self.submit(state, call)
        return self.observe(task, state, call, result)


def call_request(domain: EpisodeDomain, task: dict[str, Any], state: dict[str, Any],
                 call: ToolCall, nonce: str = "") -> ExecRequest | None:
    """`domain.tool_request`, with the blame rule: when the call cannot become a program, the same
    tool called with blank text on the task's start state decides who is at fault. If that one
    builds, what the model wrote broke it: ToolCallError (a tool-error observation, the episode
    goes on). If not, the task itself cannot run the tool: the exception goes on (an `input`
    error). Neither probe reuses anything the model wrote or ran."""
    try:
        return domain.tool_request(task, state, call, nonce)
    except Exception as e:  # noqa: BLE001  any failure is blamed, never raised out of a stage
        blank = ToolCall(call.name, {k: "" if isinstance(v, str) else v
                                     for k, v in call.arguments.items()})
        try:
            domain.tool_request(task, domain.start_state(task), blank, nonce)
        except Exception:  # noqa: BLE001
            raise e from None
        raise ToolCallError(f"{call.name}: the call cannot be run "
                            f"({type(e).__name__}: {str(e)[:200]})") from None


def observe_safely(domain: EpisodeDomain, task: dict[str, Any], state: dict[str, Any],
                   call: ToolCall, result: ExecResult | None) -> tuple[Step, str | None]:
    """(`domain.step`, None), or, when reading the tool's output failed, an error observation
    with the state unchanged and why: the output is the model's code's to shape, so nothing it
    holds may raise out of a stage (domains/untrusted_text.py bounds the known parsers; this
    holds for any other)."""
    try:
        return domain.step(task, state, call, result), None
    except Exception as e:  # noqa: BLE001
        why = f"the tool's output could not be read ({type(e).__name__})"
        return Step(f"error: {why}", state, None, 0.0), why


@dataclass(frozen=True)
class Acted:
    """One action taken: the call it made (None when it made none), the step, the sandbox's
    result (None when nothing ran), and why the action or its output could not be read."""
    call: ToolCall | None
    step: Step
    result: ExecResult | None = None
    tool_error: str | None = None
    output_unreadable: bool = False


def take_action(domain: EpisodeDomain, task: dict[str, Any], state: dict[str, Any], action: str,
                run: Callable[[ExecRequest, str], ExecResult]) -> Acted:
    """The one way an episode's action is taken (the Turn stage and `flywheel replay`): parse the
    call, build its program, `run(request, nonce)` it, observe. Total over what the model wrote
    and what its program printed: an action that cannot be read or run, or output that cannot be
    read, is an error observation. What `run` raises (the sandbox failing) goes on, as does a
    failure to build the program that a blank call shares (the task's own defect)."""
    try:
        call = parse_action(action, domain.tools, domain.plain_tool)
    except ToolCallError as e:
        return Acted(None, Step(f"error: {e}", state), tool_error=str(e))
    nonce = domain.nonce()
    try:
        request = call_request(domain, task, state, call, nonce)
    except ToolCallError as e:
        return Acted(call, Step(f"error: {e}", state), tool_error=str(e))
    result = run(request, nonce) if request is not None else None
    step, unreadable = observe_safely(domain, task, state, call, result)
    return Acted(call, step, result, unreadable, unreadable is not None)


def is_episodic(domain: Domain) -> bool:
    return isinstance(domain, EpisodeDomain)


@dataclass(frozen=True)
class TurnLimits:
    """A run's turns per episode: `run` (--max-turns; 0: each domain's default) and overrides for
    single domains (--domain-max-turns DOMAIN=N, which win over `run`)."""
    run: int = 0
    per_domain: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_settings(cls, max_turns: int, items: tuple[str, ...] | list[str] = ()) -> TurnLimits:
        """From --max-turns and --domain-max-turns' DOMAIN=N items; a malformed item, N < 1, or a
        built-in domain without tools is a ValueError naming it."""
        from flywheel.domains.registry import DOMAINS
        if max_turns < 0:
            raise ValueError(f"--max-turns must be >= 0, got {max_turns}")
        per_domain = {}
        for item in items:
            name, eq, n = item.partition("=")
            name = name.strip()
            try:
                turns = int(n)
            except ValueError:
                turns = 0
            if not eq or not name or turns < 1:
                raise ValueError(f"--domain-max-turns: expected DOMAIN=N with N >= 1, got {item!r}")
            if name not in DOMAINS:
                raise ValueError(f"--domain-max-turns: unknown domain {name!r}")
            if not is_episodic(DOMAINS.get(name)):
                raise ValueError(f"--domain-max-turns: domain {name} has no tools, so its attempts "
                                 "are single-turn")
            per_domain[name] = turns
        return cls(max_turns, tuple(sorted(per_domain.items())))

    @classmethod
    def of(cls, limits: int | TurnLimits) -> TurnLimits:
        """`limits` as TurnLimits (an int is the run's --max-turns alone)."""
        return limits if isinstance(limits, TurnLimits) else cls(limits)

    def for_domain(self, domain: Domain) -> int:
        if not is_episodic(domain):
            return 1
        return max(1, dict(self.per_domain).get(domain.name) or self.run or domain.max_turns)

    def most(self, domains) -> int:
        """The most turns any of `domains` (or an override, or --max-turns) allows."""
        return max([1, self.run, *(n for _, n in self.per_domain),
                    *(self.for_domain(d) for d in domains)])


def turns_for(domain: Domain, limits: int | TurnLimits) -> int:
    """Turns an attempt of `domain` gets: for a domain with tools, its override, else the run's
    --max-turns, else its own default (`limits` as an int: the run's --max-turns alone); 1 for
    any other."""
    return TurnLimits.of(limits).for_domain(domain)


def cut_middle(text: str, limit: int) -> tuple[str, int]:
    """(text, characters cut): at most `limit` characters, keeping head and tail around a marker
    that says how much was cut (errors show up at both ends of long outputs)."""
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    marker = f"\n[... {cut} characters cut ...]\n"
    keep = max(0, limit - len(marker))
    head = keep // 2
    return text[:head] + marker + text[len(text) - (keep - head):], cut
