"""Reading a JSON answer out of a response, as the verifiers that take JSON read it (`structured`,
`document_fields`, `format_rules`) and as those domains' answer keys read it (maj@N votes on the
verifier's own reading). Bounded: the text is cut to MAX_CHARS, deep nesting is no answer."""

from __future__ import annotations

import json
import re
from typing import Any

_BLOCK = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.S | re.I)
MAX_CHARS = 100_000
MAX_DEPTH = 64  # deeper JSON is no answer to a schema; recursing into it would hit Python's stack


class _Duplicate(dict):
    """A JSON object that remembers whether a key appeared twice (hedging between two values)."""
    duplicated = False


def _object(pairs):
    obj = _Duplicate(pairs)
    obj.duplicated = len(obj) < len(pairs) or any(getattr(v, "duplicated", False) for _, v in pairs)
    return obj


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (iteratively: it may be nested thousands deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json(response: str) -> tuple[Any, list[str]]:
    """(the JSON value of the response or None, flags). Tries the last ```json block, then the
    whole text, then the span from the first `{` to the last `}`. A value nested deeper than
    MAX_DEPTH counts as no value."""
    text = response[:MAX_CHARS]
    blocks = _BLOCK.findall(text)
    decoded = []
    for candidate in [*blocks] or [text.strip(), text[text.find("{"):text.rfind("}") + 1]]:
        try:
            decoded.append(json.loads(candidate, object_pairs_hook=_object, parse_constant=_reject_constant))
        except (ValueError, RecursionError):
            continue
        if depth(decoded[-1]) > MAX_DEPTH:
            decoded.pop()
            continue
        if not blocks:
            break
    if not decoded:
        return None, []
    flags = ["multiple_answers"] if len({json.dumps(d, sort_keys=True) for d in decoded}) > 1 else []
    flags += ["duplicate_keys"] if getattr(decoded[-1], "duplicated", False) else []
    return decoded[-1], flags
