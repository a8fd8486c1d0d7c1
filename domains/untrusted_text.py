"""Reading what a model wrote, or what its code printed, on the trusted side: total and linear.

Every trusted parser of model-controlled text (tool calls, values a program printed, a
response's syntax tree) goes through these, because the text can be built to break a parser:
nested ten thousand deep (`json.loads` and `ast.parse` raise RecursionError or MemoryError, and
a tree that does parse can still break every recursive consumer after it: `ast.unparse`,
`compile`, `literal_eval`, a JSON Schema validator), megabytes long, or made of numbers with a
million digits. Each function here either returns a value that is safe to hand on (bounded
depth) or says the text is unreadable: it never raises anything else and costs linear time.

    value = load_json(stdout_line)        # raises Unreadable (a ValueError) saying why
    tree = parse_python(code)             # None when it does not parse or nests too deeply
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

MAX_DEPTH = 100  # deeper than any real answer or tool call; far below the recursion limit
# What the parsers raise on hostile input, besides their own documented errors: a deep nesting
# (RecursionError; MemoryError from the parser's stack), a huge number (ValueError, OverflowError).
PARSER_FAILURES = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, OverflowError)


class Unreadable(ValueError):
    """The text cannot be read as what was expected; the message says why, briefly."""


def json_depth(value: Any, stop: int | None = None) -> int:
    """How deeply `value` (lists and dicts) nests, counted without recursion (up to `stop`)."""
    depth, level = 0, [value]
    while level and (stop is None or depth <= stop):
        containers = [v for v in level if isinstance(v, (list, dict))]
        if not containers:
            break
        depth += 1
        level = [x for v in containers for x in (v.values() if isinstance(v, dict) else v)]
    return depth


def load_json(text: str, max_depth: int = MAX_DEPTH, **kwargs) -> Any:
    """`json.loads(text)` that raises only Unreadable: not JSON, nested deeper than `max_depth`,
    or holding a number Python refuses to read (over 4,300 digits). Extra keyword arguments go to
    json.loads (hooks)."""
    try:
        value = json.loads(text, **kwargs)
    except json.JSONDecodeError as e:
        raise Unreadable(f"not JSON ({e.msg} at character {e.pos})") from None
    except RecursionError:
        raise Unreadable(f"JSON nested more than {max_depth} deep") from None
    except PARSER_FAILURES as e:
        raise Unreadable(f"not readable as JSON ({type(e).__name__}: {str(e)[:100]})") from None
    if json_depth(value, stop=max_depth) > max_depth:
        raise Unreadable(f"JSON nested more than {max_depth} deep")
    return value


def tree_depth(tree: ast.AST, stop: int | None = None) -> int:
    """How deeply the syntax tree nests, counted without recursion (up to `stop`)."""
    depth, level = 0, [tree]
    while level and (stop is None or depth <= stop):
        depth += 1
        level = [child for node in level for child in ast.iter_child_nodes(node)]
    return depth


def parse_python(source: str, mode: str = "exec", max_depth: int = MAX_DEPTH) -> ast.AST | None:
    """The syntax tree of `source`, or None when it does not parse, or its tree nests deeper than
    `max_depth` (a tree that deep breaks `ast.unparse`, `compile` and `ast.literal_eval`)."""
    try:
        tree = ast.parse(source, mode=mode)
    except PARSER_FAILURES:
        return None
    return tree if tree_depth(tree, stop=max_depth) <= max_depth else None


_BRACES = re.compile(r"\\(?:boxed|fbox)\s*\{|[{}]")


def boxed(text: str) -> list[str]:
    """The contents of every \\boxed{...} (or \\fbox{...}), braces balanced, in order of
    their start. One pass with a stack: thousands of unclosed boxes cost no more than one."""
    found, stack = [], []  # stack: where each open brace's content starts, or -1 if not a box
    for m in _BRACES.finditer(text):
        if m.group() == "}":
            if stack and (start := stack.pop()) >= 0:
                found.append((start, text[start:m.start()]))
        else:
            stack.append(m.end() if m.group() != "{" else -1)
    return [content for _, content in sorted(found)]
