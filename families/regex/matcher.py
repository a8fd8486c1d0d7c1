"""A linear-time regular-expression matcher for untrusted patterns: Thompson's NFA, simulated
state-set by state-set (Pike), so a pattern costs at most len(text) x states steps whatever it
is. Python's `re` backtracks: `(a+)+$` on a long run of `a`s takes exponential time, so a model's
pattern must never reach it on the trusted side.

Syntax (Python's, on ASCII classes): literals and escaped metacharacters, `.`, classes (`[a-z]`,
`[^...]`, `\\d \\w \\s` and their capitals), groups `( )` and `(?: )`, `|`, the quantifiers
`* + ? {m} {m,} {m,n}` (a lazy `?` after one changes nothing for a full match), `^` first and
`$` last (a full match anyway). Anything else (backreferences, lookarounds, flags, anchors inside)
is refused with RegexError, as are patterns over MAX_PATTERN characters, counts over MAX_COUNT
and automata over MAX_STATES states.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_PATTERN = 300
MAX_COUNT = 50
MAX_STATES = 1000
MAX_TEXT = 1000

_DIGIT = ((48, 57),)
_WORD = ((48, 57), (65, 90), (95, 95), (97, 122))
_SPACE = ((9, 13), (32, 32))
_SHORTHANDS = {"d": (False, _DIGIT), "w": (False, _WORD), "s": (False, _SPACE),
               "D": (True, _DIGIT), "W": (True, _WORD), "S": (True, _SPACE)}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}
_META = set(".^$*+?{}[]\\|()")


class RegexError(ValueError):
    """The pattern is not one this matcher reads (the message says why)."""


@dataclass(frozen=True)
class Regex:
    """A compiled pattern: `states` are ("c", (negated, ranges), next), ("s", a, b) or ("m",)."""
    pattern: str
    states: tuple
    start: int

    def fullmatch(self, text: str) -> bool:
        """Whether the whole of `text` matches; O(len(text) * states)."""
        if len(text) > MAX_TEXT:
            raise RegexError(f"text of {len(text)} characters; at most {MAX_TEXT}")
        current = self._closure([self.start])
        for ch in text:
            code = ord(ch)
            moved = [self.states[i][2] for i in current
                     if self.states[i][0] == "c" and _hit(self.states[i][1], code)]
            current = self._closure(moved)
            if not current:
                return False
        return any(self.states[i][0] == "m" for i in current)

    def _closure(self, starts: list[int]) -> list[int]:
        seen, out, stack = set(), [], list(starts)
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            if self.states[i][0] == "s":
                stack += [self.states[i][2], self.states[i][1]]
            else:
                out.append(i)
        return out


def _hit(pred: tuple, code: int) -> bool:
    negated, ranges = pred
    return any(lo <= code <= hi for lo, hi in ranges) != negated


def compile_regex(pattern: str) -> Regex:
    """`pattern` compiled, or RegexError saying why it cannot be."""
    if not isinstance(pattern, str):
        raise RegexError("the pattern is not text")
    if len(pattern) > MAX_PATTERN:
        raise RegexError(f"the pattern is {len(pattern)} characters; at most {MAX_PATTERN}")
    body = pattern[1:] if pattern.startswith("^") else pattern
    if body.endswith("$") and not _escaped_at(body, len(body) - 1):
        body = body[:-1]
    parser = _Parser(body)
    tree = parser.alternation()
    if parser.pos != len(body):
        raise RegexError(f"unbalanced ')' at {parser.pos}")
    builder = _Builder()
    start, outs = builder.build(tree)
    match = builder.add(["m"])
    builder.patch(outs, match)
    return Regex(pattern, tuple(tuple(s) for s in builder.states), start)


def _escaped_at(text: str, index: int) -> bool:
    slashes = 0
    while index - 1 - slashes >= 0 and text[index - 1 - slashes] == "\\":
        slashes += 1
    return slashes % 2 == 1


class _Parser:
    """Recursive descent over the pattern into ("lit", pred) | ("cat", [..]) | ("alt", [..]) |
    ("rep", node, min, max|None); depth is bounded by the pattern's length cap."""

    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def alternation(self):
        branches = [self.concatenation()]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.concatenation())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concatenation(self):
        items = []
        while self.peek() is not None and self.peek() not in "|)":
            items.append(self.repeat())
        return ("cat", items)

    def repeat(self):
        if self.peek() in ("*", "+", "?"):
            raise RegexError(f"nothing to repeat at {self.pos}")
        node = self.atom()
        bounds = self.quantifier()
        if bounds is None:
            return node
        if self.peek() == "?":  # lazy: the same language
            self.pos += 1
        if self.peek() in ("*", "+", "?") or self.quantifier(peek_only=True):
            raise RegexError(f"multiple repeat at {self.pos}")
        return ("rep", node, *bounds)

    def quantifier(self, peek_only: bool = False):
        ch = self.peek()
        if ch in ("*", "+", "?"):
            if not peek_only:
                self.pos += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        if ch != "{":
            return None
        end = self.text.find("}", self.pos)
        inside = self.text[self.pos + 1:end] if end > 0 else ""
        low, comma, high = inside.partition(",")
        digits = low.isascii() and high.isascii() and (low.isdigit() or (not low and comma))
        if not digits or (high and not high.isdigit()):
            return None  # a literal `{`, as Python reads it
        if peek_only:
            return True
        low_n, high_n = int(low or 0), (int(high) if high else (None if comma else int(low)))
        if low_n > MAX_COUNT or (high_n or 0) > MAX_COUNT:
            raise RegexError(f"a count above {MAX_COUNT}")
        if high_n is not None and high_n < low_n:
            raise RegexError("min repeat greater than max repeat")
        self.pos = end + 1
        return low_n, high_n

    def atom(self):
        ch = self.peek()
        self.pos += 1
        if ch == "(":
            if self.text.startswith("?:", self.pos):
                self.pos += 2
            elif self.peek() == "?":
                raise RegexError("lookarounds, flags and named groups are not supported")
            node = self.alternation()
            if self.peek() != ")":
                raise RegexError("missing ')'")
            self.pos += 1
            return node
        if ch == "[":
            return ("lit", self.char_class())
        if ch == ".":
            return ("lit", (True, ((10, 10),)))
        if ch == "\\":
            return ("lit", self.escape(in_class=False))
        if ch in ("^", "$"):
            raise RegexError("anchors are supported only at the pattern's ends")
        return ("lit", (False, ((ord(ch), ord(ch)),)))

    def escape(self, in_class: bool) -> tuple:
        ch = self.peek()
        if ch is None:
            raise RegexError("a pattern cannot end in a backslash")
        self.pos += 1
        if ch in _SHORTHANDS:
            negated, ranges = _SHORTHANDS[ch]
            if in_class and negated:
                raise RegexError(f"\\{ch} inside a class is not supported")
            return negated, ranges
        if ch in _ESCAPES:
            code = ord(_ESCAPES[ch])
            return False, ((code, code),)
        if ch in _META or ch in "-/ '\"" or (not ch.isalnum() and ch.isascii()):
            return False, ((ord(ch), ord(ch)),)
        raise RegexError(f"the escape \\{ch} is not supported")

    def char_class(self) -> tuple:
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges, first = [], True
        while True:
            ch = self.peek()
            if ch is None:
                raise RegexError("unterminated character set")
            if ch == "]" and not first:
                self.pos += 1
                return negated, tuple(ranges)
            first = False
            low = self.class_item()
            if isinstance(low, tuple):  # a shorthand (\d, \w, \s): its ranges
                ranges += low
            elif self.peek() == "-" and self.pos + 1 < len(self.text) and self.text[self.pos + 1] != "]":
                self.pos += 1
                high = self.class_item()
                if isinstance(high, tuple) or high < low:
                    raise RegexError("bad character range")
                ranges.append((low, high))
            else:
                ranges.append((low, low))

    def class_item(self) -> int | tuple:
        """One character's code, or a shorthand's ranges (`\\d` in `[\\d.]`)."""
        ch = self.peek()
        self.pos += 1
        if ch != "\\":
            return ord(ch)
        shorthand = self.peek() in _SHORTHANDS
        _, ranges = self.escape(in_class=True)
        return ranges if shorthand else ranges[0][0]


class _Builder:
    """Thompson's construction; `build(node)` -> (start state, dangling outs)."""

    def __init__(self):
        self.states: list[list] = []

    def add(self, state: list) -> int:
        if len(self.states) >= MAX_STATES:
            raise RegexError(f"the pattern needs more than {MAX_STATES} states")
        self.states.append(state)
        return len(self.states) - 1

    def patch(self, outs: list[tuple[int, int]], target: int) -> None:
        for index, slot in outs:
            self.states[index][slot] = target

    def build(self, node) -> tuple[int, list[tuple[int, int]]]:
        kind = node[0]
        if kind == "lit":
            i = self.add(["c", node[1], None])
            return i, [(i, 2)]
        if kind == "cat":
            if not node[1]:
                i = self.add(["s", None, None])  # epsilon: both ways lead on
                return i, [(i, 1), (i, 2)]
            start, outs = self.build(node[1][0])
            for item in node[1][1:]:
                s, o = self.build(item)
                self.patch(outs, s)
                outs = o
            return start, outs
        if kind == "alt":
            starts, outs = [], []
            for branch in node[1]:
                s, o = self.build(branch)
                starts.append(s)
                outs += o
            start = starts[-1]
            for s in reversed(starts[:-1]):
                start = self.add(["s", s, start])
            return start, outs
        _, inner, low, high = node
        pieces = [self.build(inner) for _ in range(low)]
        if high is None:
            s, o = self.build(inner)
            loop = self.add(["s", s, None])
            self.patch(o, loop)
            pieces.append((loop, [(loop, 2)]))
        else:
            for _ in range(high - low):
                s, o = self.build(inner)
                skip = self.add(["s", s, None])
                pieces.append((skip, o + [(skip, 2)]))
        if not pieces:
            i = self.add(["s", None, None])
            return i, [(i, 1), (i, 2)]
        start, outs = pieces[0]
        for s, o in pieces[1:]:
            self.patch(outs, s)
            outs = o
        return start, outs
