"""Multi-turn episodes, the domain side: one step per action, what the model observes, what is scored.

An episode's state travels inside the attempt record from one turn to the next (`EpisodeState`:
the turn, the domain's own JSON-able state such as the files written so far, the observation to
show next): a turn may run on another worker than the one before it, so nothing lives in a
worker's memory or in a sandbox between turns. Each tool call runs in a fresh sandbox built from
that state, through the one tool runner (domains/tool_runner.py: nonce, retries, output reading).

    state = domain.start_state(task)
    step = domain.step(task, state, action, runner)   # parse the call, run it, observe: a Step
    state = step.state ... until step.done
    domain.final_response(task, state)   # what Execute and Verify score, as for a single turn

This is SkyRL's `BaseTextEnv.step` (observation, reward, done, metadata) with the state passed in
and out rather than kept in the object. A single-turn domain's `step` is the one-step case.
The final score never trusts a tool's output: the episode's answer is executed and verified again
by the domain's ordinary single-turn path (`Domain.answer_step`), hidden tests included.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from flywheel.domains.domain import SUBMITTED, Domain, Step, ToolSpec
from flywheel.domains.tool_runner import ToolRunner, Unbuildable
from flywheel.domains.tools import SUBMIT, ToolCall, ToolCallError, parse_action
from flywheel.sandbox import ExecRequest, ExecResult

SOLVED, MAX_TURNS, BUDGET, FAILED = "solved", "max_turns", "budget", "failed"


@dataclass(frozen=True)
class EpisodeState:
    """A live episode between two turns, as its attempt record carries it (`Attempt.episode`):
    the turn number and the most it may take (its domain's), the domain's state, the tools shown
    to the policy, the observation to show next, and how it ended (None while live). Only what
    differs per episode: the run's settings (budget, context, observation size, tool-call limit)
    are `EpisodeSettings` (domains/episode_settings.py), given to the stages once. Change it with
    `replace`, never in place."""
    turn: int
    max_turns: int
    state: dict[str, Any]
    tools: list[dict[str, Any]]
    observation: str | None = None
    end: str | None = None

    def replace(self, **changes) -> EpisodeState:
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(cls, value: EpisodeState | dict[str, Any]) -> EpisodeState:
        """`value` as an EpisodeState (a mapping of its fields, as the turn sampler returns it)."""
        return value if isinstance(value, cls) else cls(**dict(value))

    # A read-only mapping view, for the turn sampler (transforms/turn.py generate_turn_batch)
    # that reads it by key; new code reads attributes.
    def keys(self):
        return [f.name for f in dataclasses.fields(self)]

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.keys() else default


class EpisodeDomain(Domain):
    """A domain whose tasks can be worked on over several turns with tools.

    Subclasses set `tools` (they always include `submit_tool`: `submit` unless the domain names
    another), `plain_tool` (what a response without a
    tool call means) and `max_turns` (their default; a run's --max-turns overrides it), and
    implement `tool_program`, `observe` and `final_response`.
    """

    max_turns: int = 1
    plain_tool: str = ""
    tools: tuple[ToolSpec, ...] = (SUBMIT,)
    submit_tool: ToolSpec = SUBMIT   # the tool (among `tools`) that ends the episode
    answer_field = "answer"           # the state key the final answer is kept under

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

    def context_anchor(self, task: dict[str, Any], state: dict[str, Any]) -> str:
        """What an `anchored` context keeps of the episode's work besides its last turns (a
        repository episode: its diff); by default nothing."""
        return ""

    def final_response(self, task: dict[str, Any], state: dict[str, Any]) -> str:
        """The episode's answer: what the single-turn Execute and Verify score."""
        return state.get(self.answer_field, "")

    def episode_flags(self, task: dict[str, Any], state: dict[str, Any]) -> list[str]:
        """Hacks the episode's state shows that its answer cannot (a repository episode's shell
        command writing outside the repository): each scores the episode 0 at Verify, flagged
        `exploit_<flag>`. By default none."""
        return []

    def submit(self, state: dict[str, Any], call: ToolCall) -> Step:
        return Step("submitted", {**state, self.answer_field: call.arguments["answer"]}, SUBMITTED)

    def tool_request(self, task: dict[str, Any], state: dict[str, Any], call: ToolCall,
                     nonce: str = "") -> ExecRequest | None:
        """The sandbox request of `call` (`Domain.to_request`), or None (submit, or a tool that
        runs nothing)."""
        if call.name == self.submit_tool.name:
            return None
        return self.to_request(self.tool_program(task, state, call, **self.report(nonce)))

    def step(self, task: dict[str, Any], state: dict[str, Any], action: str,
             runner: ToolRunner) -> Step:
        """Parse the tool call in `action`, run it through `runner`, observe. Total over what the
        model wrote and what its program printed: an action that cannot be read or run, or output
        that cannot be read, is an error observation and the episode goes on. What the runner
        raises goes on: the sandbox failing (SandboxError), or the task's own defect
        (`Unbuildable` with blame "input")."""
        try:
            call = parse_action(action, self.tools, self.plain_tool)
        except ToolCallError as e:
            return Step(f"error: {e}", state, tool_error=str(e))
        try:
            result = runner.run(self, lambda nonce: self.tool_request(task, state, call, nonce),
                                lambda nonce: self.tool_request(task, self.start_state(task),
                                                                blank_call(call), nonce))
        except Unbuildable as e:
            if e.blame != "model":
                raise
            why = (f"{call.name}: the call cannot be run "
                   f"({type(e.problem).__name__}: {str(e.problem)[:200]})")
            return Step(f"error: {why}", state, call=call, tool_error=why)
        step, unreadable = observe_safely(self, task, state, call, result)
        return dataclasses.replace(step, call=call, result=result, tool_error=unreadable,
                                   output_unreadable=unreadable is not None)

    def observe_call(self, task: dict[str, Any], state: dict[str, Any], call: ToolCall,
                     result: ExecResult | None) -> Step:
        """Submit ends the episode; any other tool is the domain's `observe`."""
        if call.name == self.submit_tool.name:
            return self.submit(state, call)
        return self.observe(task, state, call, result)


def blank_call(call: ToolCall) -> ToolCall:
    """`call` with its text arguments blank: the blame rule's probe, nothing the model wrote."""
    return ToolCall(call.name, {k: "" if isinstance(v, str) else v for k, v in call.arguments.items()})


def observe_safely(domain: EpisodeDomain, task: dict[str, Any], state: dict[str, Any],
                   call: ToolCall, result: ExecResult | None) -> tuple[Step, str | None]:
    """(`domain.observe_call`, None), or, when reading the tool's output failed, an error
    observation with the state unchanged and why: the output is the model's code's to shape, so
    nothing it holds may raise out of a stage (domains/untrusted_text.py bounds the known parsers;
    this holds for any other)."""
    try:
        return domain.observe_call(task, state, call, result), None
    except Exception as e:  # noqa: BLE001
        why = f"the tool's output could not be read ({type(e).__name__})"
        return Step(f"error: {why}", state, None, 0.0), why


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
