"""The cases of a Python unit-test task (HumanEval or MBPP format) and what the prompt shows.

`test_plan(task)` is the harness's plan (families/python/harnesses/pytests.py runs it): the setup
code, each top-level assert-holding statement as one case step named visible_i or hidden_i, and
which test-side names stand for which solution function. A case that does not use the solution
(`assert True`, an assert on test-side values only) is demoted to setup: anything would pass it.
A hidden case is made visible when the prompt shows it: every call it makes to the solution is
one of the prompt's worked examples or of the visible cases, with the same expected value
(shown_examples.py). Only the standard library's ast; nothing here runs the task's code.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from flywheel.families.python.shown_examples import UNKNOWN, case_examples, is_shown, parameters, prompt_examples

_BUILTIN_NAMES = set(dir(builtins))
# What parsing a response may raise besides SyntaxError: a null byte (ValueError), a tree too deep
# to build (RecursionError, MemoryError: `-` * 100000 + `1`, `a` + `.b` * 100000), a huge literal.
PARSE_FAILURES = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


def is_humaneval(task: dict) -> bool:
    return "test" in task


def parses(code: str) -> ast.Module | None:
    """The syntax tree of `code`, or None for anything that does not parse, however it fails."""
    try:
        return ast.parse(code)
    except PARSE_FAILURES:
        return None


def top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _stores(node: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    names |= {n.name for n in ast.walk(node)
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return names


def _reaching(sources: list[str], names: set[str]) -> set[str]:
    """`names` (the solution's functions) plus every name the code `sources` binds from a
    statement that uses one of them (a helper that calls the solution, a result kept for later)."""
    reach = set(names)
    statements = [node for code in sources if (tree := parses(code)) for node in tree.body]
    for _ in range(len(statements) + 1):  # to a fixed point: a helper may call a later helper
        grown = reach | {name for node in statements if _loads(node) & reach for name in _stores(node)}
        if grown == reach:
            break
        reach = grown
    return reach


def _mark_vacuous(steps: list[dict], setup: list[str], names: set[str]) -> None:
    """Demote to setup every case step that does not use the solution: `assert True`, or an assert
    on test-side values only, would otherwise count as a case that anything, even a syntax error,
    passes. A step uses the solution if it loads a solution name, a setup helper that reaches one,
    or a name an earlier such step bound (`r = candidate(x)` then `assert r == y`)."""
    reach = _reaching(setup, names)
    for step in steps:
        tree = ast.parse(step["code"])
        if _loads(tree) & reach:
            reach |= _stores(tree)
        elif step["kind"] == "case":
            step["kind"] = "setup"


def _free_names(sources: list[str], bound_by: list[str]) -> list[str]:
    """Names the test cases load but nothing binds: the solution's functions they call."""
    loaded, stored = [], set(_BUILTIN_NAMES)
    for code in bound_by:
        tree = parses(code)
        if tree:
            stored |= top_level_names(tree)
    for code in sources:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Name):
                (loaded.append(node.id) if isinstance(node.ctx, ast.Load) else stored.add(node.id))
            elif isinstance(node, ast.arg):
                stored.add(node.arg)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                stored |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return list(dict.fromkeys(n for n in loaded if n not in stored))


def _check_steps(test: str, hidden: bool) -> tuple[list[str], list[dict], str]:
    """(module-level setup, check-body steps, the check's parameter name) of a HumanEval test."""
    tree = ast.parse(test)
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if not checks:
        raise ValueError("field `test` defines no check(candidate) function")
    check = checks[-1]
    prelude = ast.unparse([n for n in tree.body if n is not check])
    steps = [{"kind": "case" if _has_assert(s) else "setup", "hidden": hidden,
              "code": ast.unparse(s)} for s in check.body]
    param = check.args.args[0].arg if check.args.args else "candidate"
    return [prelude], steps, param


def test_plan(task: dict) -> dict[str, Any]:
    """The harness's plan for `task`: setup code, steps (cases named visible_i / hidden_i), and
    which test-side names stand for which solution function. Raises ValueError on a bad task."""
    if is_humaneval(task):
        entry = task["entry_point"]
        setup, steps, bind = [task["prompt"]], [], {entry: entry}
        for field, hidden in (("visible_test", False), ("test", True)):
            if task.get(field):
                more, field_steps, param = _check_steps(task[field], hidden)
                setup += more
                steps += [dict(s, bind=param) for s in field_steps]
                bind[param] = entry
    else:
        setup = [task.get("test_setup_code") or "", "\n".join(task.get("test_imports") or [])]
        steps = [{"kind": "case", "hidden": hidden, "code": code}
                 for field, hidden in (("test_list", False), ("hidden_test_list", True),
                                       ("challenge_test_list", True))
                 for code in task.get(field) or []]
        bind = {n: n for n in _free_names([s["code"] for s in steps], setup)}
    _mark_vacuous(steps, setup, set(bind))
    _mark_shown(task, steps, bind)
    counts = {True: 0, False: 0}
    for step in steps:
        step.pop("bind", None)
        if step["kind"] == "case":
            step["name"] = f"{'hidden' if step['hidden'] else 'visible'}_{counts[step['hidden']]}"
            counts[step["hidden"]] += 1
    if not counts[True] + counts[False]:
        raise ValueError("the task's tests hold no assert that calls the solution")
    return {"setup": setup, "steps": steps, "bind": bind}


def _shown_calls(task: dict, steps: list[dict], bind: dict[str, str]) -> dict[tuple, set]:
    """{call: expected values} the task shows: the prompt's examples and the visible cases'."""
    shown = {}
    for key, expected, _ in prompt_examples(task["prompt"], frozenset(bind.values())):
        shown.setdefault(key, set()).add(expected)
    params = parameters(task["prompt"])
    for step in steps:
        if step["kind"] == "case" and not step["hidden"]:
            for key, expected in case_examples(step["code"], bind, params) or []:
                if expected not in (None, UNKNOWN):
                    shown.setdefault(key, set()).add(expected)
    return shown


def _mark_shown(task: dict, steps: list[dict], bind: dict[str, str]) -> None:
    """Make visible every hidden case the task shows (all its calls are shown examples with its
    expected values): passing it proves nothing the prompt did not give away, so it cannot pay
    as hidden, and a lookup table of such examples is what hard-coding detection looks for."""
    shown, params = _shown_calls(task, steps, bind), parameters(task["prompt"])
    for step in steps:
        if step["kind"] == "case" and step["hidden"]:
            step["hidden"] = not is_shown(case_examples(step["code"], bind, params), shown)


def shown_examples(task: dict) -> list[str]:
    """The prompt's worked examples as asserts (`assert f(x) == y`), for hard-coding detection."""
    functions = frozenset(test_plan(task)["bind"].values())
    return [f"assert {source}" for _, _, source in prompt_examples(task["prompt"], functions)]


def case_names(task: dict) -> list[str]:
    return [s["name"] for s in test_plan(task)["steps"] if s["kind"] == "case"]
