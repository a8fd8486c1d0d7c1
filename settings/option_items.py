"""KEY=VALUE options as a command line gives them, with values that may contain commas.

    --policy-options 'model=smollm2,system_prompt="Be brief, and exact.",stop="</a>,</b>"'
    --sandbox-options "runtime=runsc,extra='a,b'"

Items are separated by commas. A value that holds a comma is quoted: `"..."` is a JSON string
(so `\\"`, `\\\\` and `\\n` escape as in JSON), `'...'` is taken literally. A quote counts only as
the first character of a value, so an apostrophe inside a plain value (`system_prompt=Don't`)
is just a character. A quoted value is always a string: `"true"` and `"3"` stay text. Plain
values keep their old meaning: true/false are booleans, digits an integer, anything else text.

Standard library only: the sandbox CLI parses its options without importing the trainer.
"""

from __future__ import annotations

import json

QUOTES = "\"'"


def split_items(text: str, flag: str = "options") -> tuple[str, ...]:
    """'a=1,b="x, y",c=z' -> ('a=1', 'b="x, y"', 'c=z'): the items of `text`, their quotes
    kept (parse_item removes them). ValueError, naming the item, for an unclosed quote or text
    after a closing quote."""
    items, start, i = [], 0, 0
    while i <= len(text):
        if i == len(text) or text[i] == ",":
            if text[start:i]:
                items.append(text[start:i])
            start = i = i + 1
            continue
        key, sep, _ = text[start:i + 1].partition("=")
        if sep and i == start + len(key) + 1 and text[i] in QUOTES:  # a quoted value begins
            i = _closing_quote(text, i, flag, start)
            if i + 1 < len(text) and text[i + 1] != ",":
                end = text.find(",", i)
                raise ValueError(f"{flag} item {text[start:end if end >= 0 else None]!r}: text "
                                 "after the closing quote; expected a comma or the end")
        i += 1
    return tuple(items)


def _closing_quote(text: str, i: int, flag: str, start: int) -> int:
    quote, j = text[i], i + 1
    while j < len(text):
        if quote == '"' and text[j] == "\\":
            j += 2
            continue
        if text[j] == quote:
            return j
        j += 1
    raise ValueError(f"{flag} item {text[start:]!r}: the quote {quote} is never closed; expected "
                     f"KEY={quote}VALUE{quote}")


def parse_item(item: str, flag: str = "option") -> tuple[str, object]:
    """'warm=false' -> ("warm", False); 'stop="a,b"' -> ("stop", "a,b"); ValueError naming the
    item when it is not KEY=VALUE or its quoted value is malformed."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"{flag} item {item!r} is not KEY=VALUE")
    if value[:1] == '"':
        try:
            text = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"{flag} item {item!r}: the value is not one JSON string ({e.msg}); "
                             "expected KEY=\"VALUE\" with JSON escapes") from None
        if not isinstance(text, str):
            raise ValueError(f"{flag} item {item!r}: expected a quoted string")
        return key, text
    if value[:1] == "'":
        if len(value) < 2 or value[-1] != "'":
            raise ValueError(f"{flag} item {item!r}: expected KEY='VALUE', closed by a quote")
        return key, value[1:-1]
    lowered = value.lower()
    return key, {"true": True, "false": False}.get(lowered, int(value) if value.isdigit() else value)


def parse_options(items: tuple[str, ...], flag: str = "option") -> dict[str, object]:
    """("runtime=runsc", "warm=false", 'stop="a,b"') -> {"runtime": "runsc", "warm": False,
    "stop": "a,b"}: a backend's kwargs; a later item overrides an earlier one of the same key."""
    return dict(parse_item(item, flag) for item in items)
