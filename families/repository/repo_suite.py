"""Repository-level coding tasks: small multi-file Python packages, each with one planted defect.

    task = build_task(random.Random(7))
    task["repo"]["files"]      # the buggy package, its visible tests, a README
    task["fixed_files"]        # the one file the reference fix changes, fixed
    task["golden"]             # read/search, edit_file..., run_visible_tests, submit_changes

A seed picks a defect kind (evenly over KINDS), a package template (repo_templates.py), its
names and constants, and one defect site of that kind. A template is written in its FIXED form;
a site lists the snippets the defect replaces, so the buggy snapshot, fixed_files and the golden
edit_file calls all come from the same (fixed, buggy) pairs and cannot drift apart.

Hidden checks (FAIL_TO_PASS) use inputs other than the visible tests', so a patch that only
special-cases the visible inputs fails them; regression checks (PASS_TO_PASS) are the template's
checks that do not touch the defective function.
"""

from __future__ import annotations

import random
from typing import Any

from flywheel.families.repository.repo_templates import KINDS, TEMPLATES, Check, Package, Site

__all__ = ["KINDS", "build_task"]


def build_task(rng: random.Random) -> dict[str, Any]:
    """One task in the native format (JSON-able): prompt, repo, fixed_files, tests, golden."""
    kind = rng.choice(KINDS)
    package = rng.choice(TEMPLATES)(rng)
    site = rng.choice([s for s in package.sites if s.kind == kind])
    return assemble(package, site)


def assemble(package: Package, site: Site) -> dict[str, Any]:
    """The task for `site` planted in `package`."""
    pkg = package.name
    path = f"{pkg}/{site.module}.py"
    fixed_text = package.modules[site.module]
    buggy_text = plant(fixed_text, site.edits)
    files = {f"{pkg}/{mod}.py": text for mod, text in package.modules.items()}
    files[path] = buggy_text
    tests = test_files(pkg, package.tests + [site.visible])
    files.update(tests)
    files["README.md"] = package.readme
    checks = package.regression
    regression = [c for c in checks if site.symbol not in c.uses]
    ids = _Ids()
    return {
        "prompt": site.prompt,
        "repo": {"files": dict(sorted(files.items()))},
        "fixed_files": {path: fixed_text},
        "visible_tests": sorted(tests),
        "hidden_tests": [ids.check(pkg, c) for c in site.hidden],
        "regression_tests": [ids.check(pkg, c) for c in regression],
        "golden": golden(pkg, site, buggy_text),
        "kind": site.kind,
        "package": pkg,
    }


def plant(fixed_text: str, edits: tuple[tuple[str, str], ...]) -> str:
    """The buggy text: each fixed snippet (which must occur once) replaced by its buggy one."""
    text = fixed_text
    for fixed, buggy in edits:
        if text.count(fixed) != 1:
            raise ValueError(f"snippet does not occur exactly once: {fixed!r}")
        text = text.replace(fixed, buggy)
    return text


def golden(pkg: str, site: Site, buggy_text: str) -> list[dict[str, Any]]:
    """A reference trajectory: find the function, read its file (and the sibling it depends
    on), undo each buggy snippet with edit_file, run the tests, submit."""
    path = f"{pkg}/{site.module}.py"
    name = site.symbol.split(".")[-1]
    calls: list[dict[str, Any]] = [{"name": "search", "arguments": {"pattern": rf"def {name}\b"}}]
    calls.append({"name": "read_file", "arguments": {"path": path}})
    for mod in site.reads:
        calls.append({"name": "read_file", "arguments": {"path": f"{pkg}/{mod}.py"}})
    text = buggy_text
    for fixed, buggy in reversed(site.edits):
        if text.count(buggy) != 1:  # the edit tool needs a unique `old`
            raise ValueError(f"buggy snippet is not unique: {buggy!r}")
        text = text.replace(buggy, fixed)
        calls.append({"name": "edit_file", "arguments": {"path": path, "old": buggy, "new": fixed}})
    calls.append({"name": "run_visible_tests", "arguments": {}})
    calls.append({"name": "submit_changes", "arguments": {}})
    return calls


def test_files(pkg: str, tests: list[tuple[str, str, str, str]]) -> dict[str, str]:
    """tests/test_<module>.py for each module: one import line, then plain test functions.
    A test is (module, name, imported names comma-separated, asserted expression)."""
    by_module: dict[str, list[tuple[str, str, str]]] = {}
    for module, name, names, expr in tests:
        by_module.setdefault(module, []).append((name, names, expr))
    files = {}
    for module, entries in by_module.items():
        imported = sorted({n.strip() for _, names, _ in entries for n in names.split(",")})
        head = f"from {pkg}.{module} import {', '.join(imported)}\n"
        funcs = [f"def test_{name}():\n    assert {expr}\n" for name, _, expr in entries]
        files[f"tests/test_{module}.py"] = head + "\n\n" + "\n\n".join(funcs)
    return files


class _Ids:
    """Check ids unique within a task: 'module.function[n]'."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def check(self, pkg: str, check: Check) -> dict[str, Any]:
        call = check.call.removeprefix("round(")
        stem = f"{check.module}.{call.split('(')[0].strip()}"
        n = self.seen.get(stem, 0)
        self.seen[stem] = n + 1
        return {"id": f"{stem}[{n}]", "module": f"{pkg}.{check.module}",
                "call": check.call, "expect": check.expect}
