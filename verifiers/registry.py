"""The verifier registry: a name -> Verifier, filled by the `register_verifier` decorator.

A verifier turns (task, response, sandbox result) into a Verdict. It is pure and deterministic:
the sandbox already ran whatever the response asked to run, and the verdict is decided here, in
the trusted process, from the recorded result, never from what the untrusted code claims.
Every module of this package and of every task family (`flywheel.families.*`) is found by the
project's one registry rule (`flywheel.registry`), so a verifier kind is one file in its family;
modules keep heavy imports (sympy, reasoning-gym) inside functions so that discovering them stays
cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from flywheel.registry import Registry


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

    @property
    def __wrapped__(self):  # the registry tells two registrations apart by their function
        return self.fn


VERIFIERS: Registry[Verifier] = Registry("verifier", home=("flywheel.verifiers", "flywheel.families.*"))


def register_verifier(name: str, version: str):
    """Decorator: register `fn(task, response, execution) -> Verdict`; duplicates are refused."""
    def wrap(fn):
        VERIFIERS.register(name, Verifier(name, version, fn))
        return fn
    return wrap


def available_verifiers() -> list[str]:
    return VERIFIERS.names()


def get_verifier(name: str) -> Verifier:
    """The registered verifier `name`; unknown names raise KeyError listing the known ones."""
    return VERIFIERS.get(name)
