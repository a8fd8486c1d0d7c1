"""The domain registry: a name -> Domain registry filled by the `register_domain` decorator.

A domain is a module of a task family (families/<family>/) that defines a Domain subclass
(domains/domain.py) and decorates it. The families are discovered by the project's one registry
rule (`flywheel.registry`: every public module of every `flywheel.families` package is imported
on the first miss), so adding a domain, or a family, touches nothing else.
"""

from __future__ import annotations

from typing import Any

from flywheel.registry import Registry
# The base classes' home is domains/domain.py; a user's domain file may import them from here too.
from flywheel.domains.domain import SPLITS, Domain, SandboxNeeds, ToolSpec  # noqa: F401

DOMAINS: Registry["Domain"] = Registry("domain", home="flywheel.families.*")


def register_domain(cls: type[Domain]) -> type[Domain]:
    """Class decorator: register one instance of `cls` under `cls.name`; duplicates are refused."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    DOMAINS.register(cls.name, cls())
    return cls


def prepare_task(row: dict[str, Any], default_domain: str | None = None
                 ) -> tuple[dict[str, Any] | None, list[str]]:
    """(task, problems) for a user's task row: its domain's normalized task, or None and every
    problem found, each naming the field ("field `test` missing").

    Total: a field whose shape the domain's own checks did not foresee (normalize_task or
    validate_task raised) is still a problem of this row, naming the field that caused it."""
    name = row.get("domain") or default_domain
    if not name:
        return None, ["field `domain` missing"]
    if not isinstance(name, str) or name not in DOMAINS:
        return None, [f"field `domain`: unknown domain {_short(name)}"]
    domain = DOMAINS.get(name)
    row = {**row, "domain": name}
    try:
        return _prepared(domain, row)
    except Exception as e:  # noqa: BLE001 (a task file is untrusted input: any shape reaches here)
        return None, [_unreadable(domain, row, e)]


def _prepared(domain: Domain, row: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    task = domain.normalize_task(row)
    problems = domain.validate_task(task)
    if task.get("split", "train") not in SPLITS:
        problems.append(f"field `split` must be one of {', '.join(SPLITS)}, got {_short(task['split'])}")
    task.setdefault("split", "train")
    task.setdefault("answer", "")
    return (None if problems else task), problems


def _unreadable(domain: Domain, row: dict[str, Any], error: Exception) -> str:
    """The problem of a row the domain's checks raised on: the field without which they do not
    (the first such; fields the domain requires are tried last, as leaving one out stops
    validation early), else the error alone."""
    why = f"{type(error).__name__}: {str(error)[:200]}"
    required = set(domain.required_fields)
    order = [k for k in row if k != "domain" and k not in required] + [k for k in row if k in required]
    for name in order[:32]:
        try:
            _prepared(domain, {k: v for k, v in row.items() if k != name})
        except Exception:  # noqa: BLE001
            continue
        return f"field `{name}` has a shape domain {domain.name} cannot read ({why})"
    return f"cannot read the task ({why})"


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 64 else "a huge integer"
    return text if len(text) <= 80 else text[:77] + "..."


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
