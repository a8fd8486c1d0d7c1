"""The verifier registry and the small built-in verifiers.

A verifier turns (task, response, sandbox result) into a Verdict. It is pure and deterministic:
the sandbox already ran whatever the response asked to run, and the verdict is decided here, in
the trusted process, from the recorded result, never from what the untrusted code claims.

The verifier kinds with dependencies (Python unit tests, math, structured extraction, SQL, shell
end-state, reasoning-gym) are modules of this package, imported on first `get_verifier`, so that
importing the registry stays cheap.
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

_VERIFIERS: dict[str, "Verifier"] = {}
_BUILTIN_MODULES = {
    "python_tests": "python_tests", "math_answer": "math_answer", "structured": "structured",
    "sql_result": "sql_result", "shell_state": "shell_state", "reasoning_gym": "reasoning_gym"}


@dataclass(frozen=True)
class Verdict:
    reward: float
    verdict: str                      # "pass" | "fail" | "error"
    components: dict[str, float] = field(default_factory=dict)
    exploit_suspected: bool = False
    detail: str = ""


@dataclass(frozen=True)
class Verifier:
    name: str
    version: str
    fn: Callable[[dict, str, Any], Verdict]

    def __call__(self, task: dict, response: str, execution: Any = None) -> Verdict:
        return self.fn(task, response, execution)


def register_verifier(name: str, version: str):
    """Decorator: register `fn(task, response, execution) -> Verdict`; duplicates are refused."""
    def wrap(fn):
        builtin = _BUILTIN_MODULES.get(name)
        if name in _VERIFIERS or (builtin and fn.__module__ != f"{__name__}.{builtin}"):
            raise ValueError(f"verifier {name!r} is already registered")
        _VERIFIERS[name] = Verifier(name, version, fn)
        return fn
    return wrap


def available_verifiers() -> list[str]:
    return sorted(set(_VERIFIERS) | set(_BUILTIN_MODULES))


def get_verifier(name: str) -> Verifier:
    if name not in _VERIFIERS and name in _BUILTIN_MODULES:
        importlib.import_module(f"{__name__}.{_BUILTIN_MODULES[name]}")
    if name not in _VERIFIERS:
        raise KeyError(f"unknown verifier {name!r}; known: {', '.join(sorted(_VERIFIERS))}")
    return _VERIFIERS[name]


def _binary(ok: bool, **components: float) -> Verdict:
    return Verdict(1.0 if ok else 0.0, "pass" if ok else "fail", {"correct": float(ok), **components})


@register_verifier("exact_match", "1")
def exact_match(task: dict, response: str, execution: Any = None) -> Verdict:
    """The response, stripped of surrounding whitespace, equals the answer."""
    return _binary(response.strip() == str(task["answer"]).strip())


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def parse_number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if not _NUMBER.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


@register_verifier("numeric_match", "1")
def numeric_match(task: dict, response: str, execution: Any = None) -> Verdict:
    """The response is a number equal to the answer within a relative tolerance of 1e-9."""
    got, want = parse_number(response), parse_number(str(task["answer"]))
    if want is None:
        raise ValueError(f"task {task.get('task_id')}: answer {task['answer']!r} is not a number")
    ok = got is not None and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    return _binary(ok, parsed=float(got is not None))


_OPERATOR = re.compile(r"[-+*/%]")


@register_verifier("python_output", "1")
def python_output(task: dict, response: str, execution: Any = None) -> Verdict:
    """The sandboxed program exited 0, within its limits, and printed the answer's repr.

    The response must contain an arithmetic operator: the task asks for an expression, so a bare
    literal scores 0 (and is not counted as a pass).
    """
    if execution is None:
        raise ValueError("python_output needs a sandbox execution result")
    ran = execution.exit_code == 0 and execution.kill_reason is None
    printed = execution.stdout.strip() == repr(int(task["answer"])) if ran else False
    has_operator = bool(_OPERATOR.search(response))
    return _binary(ran and printed and has_operator, ran=float(ran), printed=float(printed),
                   has_operator=float(has_operator))


@register_verifier("digit_sum", "1")
def digit_sum(task: dict, response: str, execution: Any = None) -> Verdict:
    """The response is exactly N decimal digits whose sum is S (answer holds "N S")."""
    n, total = map(int, str(task["answer"]).split())
    text = response.strip()
    well_formed = len(text) == n and text.isascii() and text.isdigit()
    ok = well_formed and sum(map(int, text)) == total
    return _binary(ok, well_formed=float(well_formed))


@register_verifier("in_range", "1")
def in_range(task: dict, response: str, execution: Any = None) -> Verdict:
    """The response is a whole number N with A <= N <= B (answer holds "A B")."""
    low, high = map(int, str(task["answer"]).split())
    text = response.strip()
    well_formed = text.isascii() and text.isdigit() and len(text) <= 12
    ok = well_formed and low <= int(text) <= high
    return _binary(ok, well_formed=float(well_formed))
