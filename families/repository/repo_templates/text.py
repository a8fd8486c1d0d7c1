"""Package template: a text toolkit: tokens, counts, layout, case."""

from __future__ import annotations

import random

from flywheel.families.repository.repo_templates.base import Package, Site, check, fill, modules_with_init  # noqa: F401


TEXT_TOKENS = """\
\"\"\"Split text into words and sentences; the other modules build on these.\"\"\"

PUNCTUATION = ".,;:!?\\"'()"


def words(text):
    \"\"\"Lower-cased words of `text`, punctuation stripped.\"\"\"
    return [w.lower() for w in raw_words(text)]


def raw_words(text):
    \"\"\"Words of `text` as written, punctuation stripped.\"\"\"
    stripped = (raw.strip(PUNCTUATION) for raw in text.split())
    return [w for w in stripped if w]


def sentences(text):
    \"\"\"Sentences of `text`, each ending at '.', '!' or '?'.\"\"\"
    parts = []
    current = ""
    for ch in text:
        current += ch
        if ch in ".!?":
            parts.append(current.strip())
            current = ""
    if current.strip():
        parts.append(current.strip())
    return parts
"""

TEXT_COUNTS = """\
\"\"\"Word counts and frequencies.\"\"\"

from .tokens import words

STOPWORDS = (@STOP@)


def word_count(text):
    \"\"\"How many words `text` has.\"\"\"
    return len(words(text))


def frequencies(text, skip_stopwords=False):
    \"\"\"word -> count; common words are left out only when skip_stopwords is true.\"\"\"
    freq = {}
    for word in words(text):
        if skip_stopwords and word in STOPWORDS:
            continue
        freq[word] = freq.get(word, 0) + 1
    return freq


def top_words(text, n=@TOPN@):
    \"\"\"The `n` most frequent non-stopwords, most frequent first, ties alphabetical.\"\"\"
    freq = frequencies(text, skip_stopwords=True)
    return sorted(freq, key=lambda w: (-freq[w], w))[:n]
"""

TEXT_LAYOUT = """\
\"\"\"Fit text into a width.\"\"\"

MARKER = "@MARK@"


def truncate(text, width):
    \"\"\"`text` cut to at most `width` characters, ending in MARKER when cut.\"\"\"
    if len(text) <= width:
        return text
    return text[:width - len(MARKER)] + MARKER


def wrap(text, width):
    \"\"\"Greedy word wrap into lines of at most `width` characters.\"\"\"
    lines = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines
"""

TEXT_CASE = """\
\"\"\"Identifier styles built from the words of a phrase.\"\"\"

from . import tokens
from .tokens import words


def snake_case(text):
    \"\"\"'Hello World' -> 'hello_world'.\"\"\"
    return "_".join(words(text))


def kebab_case(text):
    \"\"\"'Hello World' -> 'hello-world'.\"\"\"
    return "-".join(tokens.words(text))


def camel_case(text):
    \"\"\"'hello big world' -> 'helloBigWorld'; '' for text without words.\"\"\"
    parts = words(text)
    if not parts:
        return ""
    return parts[0] + "".join(p.capitalize() for p in parts[1:])
"""


def text(rng: random.Random) -> Package:
    name = rng.choice(["textkit", "wordsmith", "strtools"])
    stop = rng.choice([("the", "a", "an"), ("the", "a", "of", "and"), ("the", "and", "to")])
    topn, mark = rng.choice([2, 3, 4, 5]), rng.choice(["...", "~", ">>"])
    subs = dict(STOP=", ".join(repr(w) for w in stop) + ("," if len(stop) == 1 else ""),
                TOPN=topn, MARK=mark)
    mods = {"tokens": TEXT_TOKENS, "counts": TEXT_COUNTS, "layout": TEXT_LAYOUT, "case": TEXT_CASE}
    mods = modules_with_init(name, "A text toolkit: words, counts, layout and identifier case.",
                             {k: fill(v, **subs) for k, v in mods.items()})
    cut = lambda t, w: t if len(t) <= w else t[:w - len(mark)] + mark  # noqa: E731
    readme = (f"# {name}\n\nSmall text utilities. Stopwords: {', '.join(stop)}. "
              f"top_words returns {topn} words unless told otherwise.\n")
    the = stop[0]
    tests = [
        ("tokens", "words", "words", "words('Hi, there!') == ['hi', 'there']"),
        ("tokens", "sentences", "sentences", "sentences('A b. C d!') == ['A b.', 'C d!']"),
        ("counts", "word_count", "word_count", "word_count('one two  three') == 3"),
        ("counts", "frequencies", "frequencies", "frequencies('b a b') == {'b': 2, 'a': 1}"),
        ("layout", "wrap", "wrap", "wrap('aa bb cc', 5) == ['aa bb', 'cc']"),
        ("layout", "truncate", "truncate", "truncate('short', 10) == 'short'"),
        ("case", "snake", "snake_case", "snake_case('Hello World') == 'hello_world'"),
        ("case", "camel", "camel_case", "camel_case('hello big world') == 'helloBigWorld'"),
    ]
    regression = [
        check("tokens", "words('Well, WELL.')", ["well", "well"], "tokens.words"),
        check("tokens", "raw_words('(Big) day')", ["Big", "day"], "tokens.raw_words"),
        check("counts", "word_count('a b c d')", 4, "counts.word_count"),
        check("layout", "truncate('abc', 3)", "abc", "layout.truncate"),
        check("layout", "wrap('one two three', 20)", ["one two three"], "layout.wrap"),
        check("case", "snake_case('Data Set')", "data_set", "case.snake_case"),
        check("counts", "top_words('x y x z y x', 2)", ["x", "y"],
              "counts.top_words", "counts.frequencies"),
    ]
    long = "abcdefghijklmnopqrstuvwxyz"
    sites = [
        Site("wrong_operator", "layout", "layout.wrap",
             (("len(line) + 1 + len(word) > width:", "len(line) + 1 + len(word) >= width:"),),
             "wrap() breaks a line early when the words would fill the width exactly; a line "
             "may be exactly `width` characters long.",
             (check("layout", "wrap('abc def ghi', 7)", ["abc def", "ghi"]),
              check("layout", "wrap('to be or not', 5)", ["to be", "or", "not"])),
             ("layout", "wrap_exact_width", "wrap", "wrap('ab cd', 5) == ['ab cd']")),
        Site("off_by_one", "layout", "layout.truncate",
             (("text[:width - len(MARKER)]", "text[:width - len(MARKER) + 1]"),),
             f"truncate(text, width) returns strings one character longer than `width` when it "
             f"cuts them; the result, {mark!r} included, must fit in `width`.",
             (check("layout", f"truncate({long!r}, 10)", cut(long, 10)),
              check("layout", "len(truncate('x' * 50, 12))", 12)),
             ("layout", "truncate_fits", "truncate", f"truncate('hello world', 8) == {cut('hello world', 8)!r}")),
        Site("missing_case", "tokens", "tokens.sentences",
             (("    if current.strip():\n        parts.append(current.strip())\n    return parts",
               "    return parts"),),
             "sentences() drops the last sentence when the text does not end with punctuation; "
             "trailing text should come back as a final sentence.",
             (check("tokens", "sentences('Yes. no')", ["Yes.", "no"]),
              check("tokens", "sentences('just words')", ["just words"])),
             ("tokens", "sentences_tail", "sentences", "sentences('Hi! Bye') == ['Hi!', 'Bye']")),
        Site("wrong_import", "case", "case.snake_case",
             (("from .tokens import words\n", "from .tokens import raw_words\n"),
              ('"_".join(words(text))', '"_".join(raw_words(text))'),
              ("    parts = words(text)\n", "    parts = raw_words(text)\n")),
             "snake_case and camel_case keep the capitals of the input ('Hello World' gives "
             "'Hello_World'); identifiers should be built from lower-cased words.",
             (check("case", "snake_case('Big Red Dog')", "big_red_dog"),
              check("case", "camel_case('NEW york')", "newYork")),
             ("case", "snake_lower", "snake_case", "snake_case('Hello World') == 'hello_world'"),
             ("tokens",)),
        Site("renamed_api", "case", "case.kebab_case",
             (('"-".join(tokens.words(text))', '"-".join(tokens.split_words(text))'),),
             "kebab_case() raises AttributeError instead of joining the words of the text "
             "with dashes.",
             (check("case", "kebab_case('Hello Big World')", "hello-big-world"),
              check("case", "kebab_case('x')", "x")),
             ("case", "kebab", "kebab_case", "kebab_case('Hello World') == 'hello-world'"),
             ("tokens",)),
        Site("wrong_default", "counts", "counts.frequencies",
             (("def frequencies(text, skip_stopwords=False):", "def frequencies(text, skip_stopwords=True):"),),
             f"frequencies(text) leaves out common words such as {the!r}; every word should be "
             f"counted unless skip_stopwords=True is passed.",
             (check("counts", f"frequencies('{the} cat {the} end')", {the: 2, "cat": 1, "end": 1}),
              check("counts", f"frequencies('{the.upper()}')", {the: 1})),
             ("counts", "frequencies_all", "frequencies", f"frequencies('{the} dog') == {{{the!r}: 1, 'dog': 1}}")),
        Site("broken_edge_case", "case", "case.camel_case",
             (('    if not parts:\n        return ""\n    return parts[0]', "    return parts[0]"),),
             "camel_case raises IndexError for an empty string or text with only punctuation; "
             "it should return ''.",
             (check("case", "camel_case('')", ""), check("case", "camel_case('?!')", "")),
             ("case", "camel_empty", "camel_case", "camel_case('...') == ''")),
    ]
    return Package(name, mods, readme, tests, regression, sites)
