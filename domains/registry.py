"""The domain registry: a name -> Domain registry filled by the `register_domain` decorator.

A domain is one file in this folder that defines a Domain subclass (domains/domain.py) and
decorates it. The built-in files are discovered by the project's one registry rule
(`flywheel.registry`: every public module of this package is imported on the first miss), so
adding a domain touches nothing else.
"""

from __future__ import annotations

from typing import Any

from flywheel.registry import Registry
# The base classes' home is domains/domain.py; a user's domain file may import them from here too.
from flywheel.domains.domain import SPLITS, Domain, SandboxNeeds, ToolSpec  # noqa: F401

DOMAINS: Registry["Domain"] = Registry("domain", home="flywheel.domains")


def register_domain(cls: type[Domain]) -> type[Domain]:
    """Class decorator: register one instance of `cls` under `cls.name`; duplicates are refused."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    DOMAINS.register(cls.name, cls())
    return cls


def prepare_task(row: dict[str, Any], default_domain: str | None = None
                 ) -> tuple[dict[str, Any] | None, list[str]]:
    """(task, problems) for a user's task row: its domain's normalized task, or None and every
    problem found, each naming the field ("field `test` missing")."""
    name = row.get("domain") or default_domain
    if not name:
        return None, ["field `domain` missing"]
    if not isinstance(name, str) or name not in DOMAINS:
        return None, [f"field `domain`: unknown domain {name!r}"]
    domain = DOMAINS.get(name)
    try:
        task = domain.normalize_task({**row, "domain": name})
    except (KeyError, TypeError, ValueError) as e:
        return None, [f"cannot read the task: {type(e).__name__}: {e}"]
    problems = domain.validate_task(task)
    if task.get("split", "train") not in SPLITS:
        problems.append(f"field `split` must be one of {', '.join(SPLITS)}, got {task['split']!r}")
    task.setdefault("split", "train")
    task.setdefault("answer", "")
    return (None if problems else task), problems


def get_domain(name: str) -> Domain:
    """The registered domain `name`; unknown names raise KeyError listing the known ones."""
    return DOMAINS.get(name)


def generating_domains(names) -> list[str]:
    """`names` in order, less the files-only domains (task_count 0: their tasks come only from
    --tasks files), i.e. the domains a run generates train and held-out tasks for."""
    return [d for d in names if DOMAINS.get(d).task_count() != 0]


def all_domains() -> dict[str, Domain]:
    return dict(DOMAINS.items())


DEFAULT_DOMAINS = ("digitsum", "interval", "pyexpr", "reverse")
"""The embedded default: four built-in domains where RL teaches the tiny policy on CPU what its
warm start did not (2026-12-06: `add`, two-digit sums, stayed flat under RL for every seed, and
`pyexpr`'s gains were copies of the target such as "848*1", which its verifier now refuses)."""
