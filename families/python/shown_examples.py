"""What a task's prompt already shows: its worked examples, as calls and expected values.

A HumanEval docstring shows `>>> f(x)` and the output below it; other prompts write `f(x) == y`,
`f(x) ➞ y`, `f(x) => y`, `f(x) returns y`, `f(x) should return y`, or list MBPP's asserts. Each
example is kept as (call key, expected key): the function, its arguments by parameter name, and
each value as a literal (so quotes, spacing, `...` continuations and keyword arguments do not
matter), or the example is dropped when a part is not a literal.

python_tests uses them twice: a hidden case all of whose calls the prompt shows with the same
expected value is visible (it tests nothing the prompt did not give away), and a response that
holds a shown example's literals is a lookup-table suspect (verifiers/hacks.py).
Task text only, never a response: the parsing here is bounded, and total on odd prompts.
"""

from __future__ import annotations

import ast
import doctest
import functools
import re

from flywheel.verifiers.hacks import canonical

# what may stand between an example's call and its expected value on one line
_SEPARATOR = re.compile(r"[ \t`*]*(?:#[ \t]*)?(?:==>|=>|->|➞|→|==|=|should[ \t]+return|returns?|gives)[ \t]*",
                        re.I)
_FAILS = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, OverflowError)
_MAX_CALL = 2000     # characters an inline example's call may span
_MAX_VALUE = 300     # characters of the line after it that may hold the expected value
_WORDS = {"true": True, "false": False, "none": None, "null": None}
_OPERATORS = set("+-*/%<>=&|^@")
UNKNOWN = ("unknown",)  # the expected value of `f(x) == <not a literal>`: equal to no shown value


def value_key(node: ast.AST):
    """The canonical key of a literal expression, or None when it is not one."""
    try:
        return canonical(ast.literal_eval(node))
    except _FAILS:
        return None


def call_key(call: ast.Call, function: str, params: dict[str, list[str]]):
    """(function, ((parameter, value key), ...)) of a call with literal arguments, positional
    ones named by the function's parameters where known, so `f([1])` is `f(xs=[1])`; else None."""
    names, parts = params.get(function, []), []
    for index, arg in enumerate(call.args):
        key = None if isinstance(arg, ast.Starred) else value_key(arg)
        if key is None:
            return None
        parts.append((names[index] if index < len(names) else str(index), key))
    for keyword in call.keywords:
        key = value_key(keyword.value) if keyword.arg else None
        if key is None:
            return None
        parts.append((keyword.arg, key))
    return (function, tuple(sorted(parts, key=repr)))


def parameters(prompt: str) -> dict[str, list[str]]:
    """{function: its positional parameter names} for the functions the prompt defines."""
    try:
        tree = ast.parse(prompt)
    except _FAILS:
        return {}
    return {node.name: [a.arg for a in node.args.posonlyargs + node.args.args]
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _expression(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except _FAILS:
        return None


def _docstrings(prompt: str) -> list[str]:
    """The docstrings of a prompt that is code (where doctest examples live: the code around them
    would read as their output), else the prompt's text."""
    try:
        tree = ast.parse(prompt)
    except _FAILS:
        return [prompt]
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef,
                                                          ast.ClassDef))]
    return [doc for n in nodes if (doc := ast.get_docstring(n, clean=False))]


def _doctests(text: str) -> list[tuple[str, str]]:
    """(source, wanted output) of each `>>>` example, `...` continuations joined (doctest's own
    parser; where its indentation rules refuse the text, one line each)."""
    try:
        return [(e.source, e.want) for e in doctest.DocTestParser().get_examples(text)]
    except ValueError:
        lines, found = text.splitlines(), []
        for i, line in enumerate(lines[:-1]):
            if line.strip().startswith(">>>") and not lines[i + 1].strip().startswith(">>>"):
                found.append((line.strip()[3:], lines[i + 1]))
        return found


def _doctest_examples(prompt: str, functions: set[str]) -> list[tuple[ast.Call, ast.expr]]:
    """(call, expected) of each doctest example whose source is a call to a solution function
    (`>>> f(x)` then its output), or compares one with a value and wants True."""
    found = []
    for source, want in (example for text in _docstrings(prompt) for example in _doctests(text)):
        # no output line: the call returned None (an expression's value prints unless it is None)
        node, wanted = _expression(source), _expression(want) if want.strip() else ast.Constant(None)
        if node is None or wanted is None:
            continue
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq) \
                and value_key(wanted) == canonical(True):
            node, wanted = _solution_side(node, functions)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
            found.append((node, wanted))
    return found


def _solution_side(compare: ast.Compare, functions: set[str]) -> tuple[ast.AST | None, ast.AST | None]:
    """(the call, the other side) of `f(x) == y` or `y == f(x)`, else (None, None)."""
    for call, other in ((compare.left, compare.comparators[0]), (compare.comparators[0], compare.left)):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in functions:
            return call, other
    return None, None


def _call_at(text: str, start: int, name: str) -> tuple[ast.Call | None, int]:
    """The call to `name` that starts at `start`, and where it ends: the first `)` that closes an
    expression parsing as that call (a `)` inside a string argument does not)."""
    end = start
    for _ in range(64):
        end = text.find(")", end + 1, start + _MAX_CALL)
        if end < 0:
            break
        node = _expression(text[start:end + 1])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            return node, end + 1
    return None, start


def _value_after(rest: str) -> ast.expr | None:
    """The longest literal at the start of `rest` (`[8, 9]` of "[8, 9]. Reply with ..."); a
    candidate ending in a full stop is skipped (`16.` of "should return 16." is the sentence's)."""
    rest = rest.strip().strip("`")
    for end in range(len(rest), 0, -1):
        candidate = rest[:end].rstrip().rstrip("`")
        if not candidate or candidate.endswith(".") or candidate[-1] in ",;:":
            continue
        tail = rest[len(candidate):]
        if tail and (tail[0].isalnum() or tail[0] in "_'\"" or tail.lstrip(" `")[:1] in _OPERATORS):
            continue  # mid-token, or `19` of "19 - 5 - 6 = 8": the start of a sum, not the value
        if candidate.lower() in _WORDS:  # `=> true` in prose examples
            return ast.Constant(_WORDS[candidate.lower()])
        node = _expression(candidate)
        if node is not None and value_key(node) is not None:
            return node
    return None


def _inline_examples(prompt: str, functions: set[str]) -> list[tuple[ast.Call, ast.expr]]:
    """(call, expected) of each `f(args) <separator> value` in the prompt's text."""
    found = []
    for name in functions:
        for match in list(re.finditer(rf"(?<![\w.]){re.escape(name)}\s*\(", prompt))[:200]:
            if prompt[:match.start()].rstrip(" \t").endswith("def"):
                continue
            call, end = _call_at(prompt, match.start(), name)
            if call is None:
                continue
            line = prompt[end:end + _MAX_VALUE].split("\n", 1)[0]
            separator = _SEPARATOR.match(line)
            if separator and (wanted := _value_after(line[separator.end():])) is not None:
                found.append((call, wanted))
    return found


@functools.lru_cache(maxsize=4096)
def prompt_examples(prompt: str, functions: frozenset[str]) -> tuple[tuple[tuple, tuple, str], ...]:
    """(call key, expected key, `f(args) == expected` as code) of every example the prompt shows
    for the solution functions `functions`, doctest and inline ones alike."""
    params, found = parameters(prompt), []
    for call, wanted in _doctest_examples(prompt, functions) + _inline_examples(prompt, functions):
        key, expected = call_key(call, call.func.id, params), value_key(wanted)
        if key is not None and expected is not None:
            try:
                source = ast.unparse(ast.Compare(left=call, ops=[ast.Eq()], comparators=[wanted]))
            except _FAILS:
                continue
            found.append((key, expected, source))
    return tuple(dict.fromkeys(found))


def case_examples(code: str, bind: dict[str, str], params: dict[str, list[str]]):
    """(call key, expected key or None) of each call to the solution in a test case, where
    `bind` maps the test's names for the solution's functions to theirs; None when some use of
    the solution in it is not a call with literal arguments (a loop variable, a helper, `map`)."""
    try:
        tree = ast.parse(code)
    except _FAILS:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id in bind]
    uses = sum(isinstance(n, ast.Name) and n.id in bind for n in ast.walk(tree))
    if not calls or uses != len(calls):
        return None
    expected = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.Is)):
            call, other = _solution_side(node, set(bind))
            if call is not None:
                expected[id(call)] = value_key(other) or UNKNOWN
    found = []
    for call in calls:
        key = call_key(call, bind[call.func.id], params)
        if key is None:
            return None
        found.append((key, expected.get(id(call))))
    return found


def is_shown(pairs, shown: dict[tuple, set]) -> bool:
    """Whether the prompt shows every call of a case (case_examples), each with the value the case
    expects where it states one (`assert f(x) == y`; a computed `== g(y)` is never shown); a case
    of another form (`assert f(x)`, `abs(f(x) - y) < 1e-6`) is shown when its calls are, since
    their outputs are."""
    return bool(pairs) and all(key in shown and (want is None or want in shown[key]) for key, want in pairs)
