"""What every package template shares: the defect kinds, the records a template returns, and the
helpers that fill and assemble its text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("wrong_operator", "off_by_one", "missing_case", "wrong_import", "renamed_api",
         "wrong_default", "broken_edge_case")


@dataclass(frozen=True)
class Check:
    """`call` evaluated in package module `module` must equal `expect`; `uses` names the
    functions ('module.function') it depends on, so a defect there drops it from regression."""
    module: str
    call: str
    expect: Any
    uses: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Site:
    """One plantable defect: `edits` are (fixed snippet, buggy snippet) pairs in `module`;
    `symbol` is the defective function; `visible` a test (module, name, imports, expr) that
    fails on the buggy code; `reads` the sibling modules the fix needs read."""
    kind: str
    module: str
    symbol: str
    edits: tuple[tuple[str, str], ...]
    prompt: str
    hidden: tuple[Check, ...]
    visible: tuple[str, str, str, str]
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class Package:
    name: str
    modules: dict[str, str]
    readme: str
    tests: list[tuple[str, str, str, str]]
    regression: list[Check]
    sites: list[Site] = field(default_factory=list)


def check(module: str, call: str, expect: Any, *uses: str) -> Check:
    return Check(module, call, expect, frozenset(uses))


def fill(text: str, **subs: Any) -> str:
    """`text` with each @KEY@ replaced by its value."""
    for key, value in subs.items():
        text = text.replace(f"@{key}@", str(value))
    return text


def modules_with_init(name: str, doc: str, modules: dict[str, str]) -> dict[str, str]:
    return {"__init__": f'"""{doc}"""\n', **modules}
