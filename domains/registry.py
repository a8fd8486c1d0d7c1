"""The domain registry: a name -> Domain dict filled by the `register_domain` decorator.

A domain is one file in this folder that defines a Domain subclass and decorates it. The built-in
files are discovered (not listed by hand), so adding a domain touches nothing else.
"""

from __future__ import annotations

import hashlib
import importlib
import pkgutil
import random
from typing import Any

_DOMAINS: dict[str, "Domain"] = {}
_NOT_DOMAIN_MODULES = {"registry"}
SPLITS = ("train", "heldout")


class Domain:
    """A family of tasks whose outcome a program checks.

    Subclasses set `name`, `verifier` (a name in the verifier registry) and `uses_sandbox`, and
    implement `sample_task` and `demonstration`; sandboxed domains also implement `program`.
    Tasks are plain dicts: task_id, domain, prompt, answer (a string the verifier reads), split.
    """

    name: str = ""
    verifier: str = ""
    uses_sandbox: bool = False
    description: str = ""
    heldout_fraction: float = 0.2
    max_new_tokens: int = 12

    def sample_task(self, rng: random.Random) -> dict[str, Any]:
        """Draw one task's `prompt` and `answer` from `rng`."""
        raise NotImplementedError

    def demonstration(self, task: dict[str, Any], rng: random.Random) -> str:
        """A correct response to `task`, for the supervised warm start."""
        raise NotImplementedError

    def program(self, task: dict[str, Any], response: str) -> dict[str, Any]:
        """What the sandbox runs for `response`: {"files": {path: text}, "command": [...]}."""
        raise NotImplementedError(f"domain {self.name} does not execute code")

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


def register_domain(cls: type[Domain]) -> type[Domain]:
    """Class decorator: register one instance of `cls` under `cls.name`; duplicates are refused."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _DOMAINS and type(_DOMAINS[cls.name]) is not cls:
        raise ValueError(f"domain {cls.name!r} is already registered by {type(_DOMAINS[cls.name])}")
    _DOMAINS[cls.name] = cls()
    return cls


def _discover() -> None:
    import flywheel.domains as package
    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in _NOT_DOMAIN_MODULES and not info.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{info.name}")


def get_domain(name: str) -> Domain:
    """The registered domain `name`; unknown names raise KeyError listing the known ones."""
    if name not in _DOMAINS:
        _discover()
    if name not in _DOMAINS:
        raise KeyError(f"unknown domain {name!r}; known: {', '.join(sorted(_DOMAINS))}")
    return _DOMAINS[name]


def all_domains() -> dict[str, Domain]:
    _discover()
    return dict(sorted(_DOMAINS.items()))


DEFAULT_DOMAINS = ("add", "digitsum", "pyexpr", "reverse")
"""The embedded default: four built-in domains the tiny policy can learn on CPU."""
