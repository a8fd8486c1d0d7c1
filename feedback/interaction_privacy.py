"""Personal data out of logged interactions, before anything is stored: dotted field paths
dropped (from the record and from every message of it), e-mail addresses and phone numbers
replaced in every text. Simple regexes: they catch the common forms, not every one.

    drop_fields(obj, ("metadata.user_email", "user"))
    redact(obj, frozenset({"email", "phone"}))  ->  (obj with [EMAIL] / [PHONE], whether any)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

REDACTIONS = {
    "email": (re.compile(r"[\w.%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"), "[EMAIL]"),
    # +CC, groups of digits split by spaces, dots, dashes or parentheses; 7-15 digits in all
    "phone": (re.compile(r"(?<![\w.])\+?(?:\(\d{1,4}\)|\d{1,4})(?:[ .-]?(?:\(\d{1,4}\)|\d{2,4})){1,4}"
                         r"(?![\w])"), "[PHONE]"),
}
DATE = re.compile(r"\d{4}-\d{2}-\d{2}$")


def drop_fields(obj: Any, paths: tuple[str, ...]) -> Any:
    """`obj` less each dotted path, from the root and from every message in any message list."""
    for path in paths:
        parts = path.split(".")
        _drop(obj, parts)
        for messages in _message_lists(obj):
            for message in messages:
                _drop(message, parts)
    return obj


def _drop(obj: Any, parts: list[str]) -> None:
    for part in parts[:-1]:
        obj = obj.get(part) if isinstance(obj, dict) else None
    if isinstance(obj, dict):
        obj.pop(parts[-1], None)


def _message_lists(obj: Any) -> Iterator[list]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("messages", "preferred_output", "non_preferred_output") \
                    and isinstance(value, list):
                yield value
            yield from _message_lists(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _message_lists(value)


def redact(value: Any, kinds: frozenset[str]) -> tuple[Any, bool]:
    """(`value` with every string's e-mail addresses / phone numbers replaced, whether any was)."""
    if isinstance(value, str):
        text = value
        for kind in sorted(kinds):
            pattern, mark = REDACTIONS[kind]
            text = pattern.sub(lambda m: mark if kind != "phone" or _is_phone(m[0]) else m[0], text)
        return text, text != value
    if isinstance(value, dict):
        pairs = [(k, redact(v, kinds)) for k, v in value.items()]
        return {k: v for k, (v, _) in pairs}, any(c for _, (_, c) in pairs)
    if isinstance(value, list):
        items = [redact(v, kinds) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


def _is_phone(text: str) -> bool:
    digits = sum(c.isdigit() for c in text)
    return 7 <= digits <= 15 and not DATE.match(text) and not text.isdigit()  # a bare number is a number


def dotted(obj: Any, path: str) -> Any:
    """The value at dotted `path` (`metadata.expected`, `messages.0.content`), or None."""
    for part in path.split("."):
        if isinstance(obj, list) and part.lstrip("-").isdigit() and -len(obj) <= int(part) < len(obj):
            obj = obj[int(part)]
        elif isinstance(obj, dict):
            obj = obj.get(part)
        else:
            return None
    return obj
