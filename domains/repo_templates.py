"""Package templates for repo_suite: small packages written in their FIXED form, with defect sites.

A template is a function rng -> Package. It picks the package name and a few constants, then
returns the modules' fixed text, visible tests, regression checks and its defect sites (one or
more per kind). Expected values are computed here by mirroring the package's own arithmetic,
and tests/domains/test_repo_suite.py runs every check against the real generated code.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable

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


# --------------------------------------------------------------------------- shopping cart

SHOP_MONEY = '''\
"""Money helpers: every amount in the package is an integer number of cents."""

CURRENCY = "@CUR@"


def percent_of(cents, percent):
    """`percent` percent of `cents`, rounded half up to a whole cent."""
    return (cents * percent + 50) // 100


def percent_off(cents, percent):
    """`cents` reduced by `percent` percent."""
    return cents - percent_of(cents, percent)


def fmt(cents):
    """`cents` as a price label such as '12.50 @CUR@'."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d} {CURRENCY}"
'''

SHOP_CART = '''\
"""A cart is a list of (price_cents, quantity) lines."""

from . import money


def line_total(price, qty):
    """Price of `qty` items at `price` cents each."""
    return price * qty


def subtotal(lines):
    """Sum of all line totals."""
    return sum(line_total(price, qty) for price, qty in lines)


def item_count(lines):
    """How many items the cart holds."""
    return sum(qty for _, qty in lines)


def priciest(lines, n):
    """The `n` largest line totals, largest first."""
    totals = sorted((line_total(p, q) for p, q in lines), reverse=True)
    return totals[:n]


def receipt(lines):
    """A price label for every line, then one for the subtotal."""
    totals = [line_total(p, q) for p, q in lines] + [subtotal(lines)]
    return [money.fmt(cents) for cents in totals]
'''

SHOP_TAX = '''\
"""Sales tax; some categories are exempt."""

from .money import percent_of

TAX_PERCENT = @TAX@
EXEMPT = ("food", "books")


def tax_for(cents, category):
    """Sales tax owed on `cents` worth of items of `category`."""
    if category in EXEMPT:
        return 0
    return percent_of(cents, TAX_PERCENT)


def with_tax(cents, category="general"):
    """`cents` plus the tax owed on it."""
    return cents + tax_for(cents, category)
'''

SHOP_DISCOUNT = '''\
"""Bulk discounts and coupons."""

from .money import percent_off

BULK_MIN = @BULK@
BULK_PERCENT = @BULKPCT@
COUPONS = {"SAVE5": 500, "SAVE10": 1000}


def bulk_price(cents, count):
    """`cents` after the bulk discount, which applies from BULK_MIN items on."""
    if count >= BULK_MIN:
        return percent_off(cents, BULK_PERCENT)
    return cents


def coupon(cents, code):
    """`cents` after coupon `code`; unknown codes change nothing, and no price goes below zero."""
    return max(cents - COUPONS.get(code, 0), 0)
'''

SHOP_CHECKOUT = '''\
"""The amount a customer pays for a cart."""

from . import cart, discount, tax


def total(lines, category="general"):
    """Subtotal, less the bulk discount, plus tax."""
    sub = discount.bulk_price(cart.subtotal(lines), cart.item_count(lines))
    return tax.with_tax(sub, category)


def average_price(lines):
    """Mean price per item in cents, rounded down; 0 for an empty cart."""
    count = cart.item_count(lines)
    if count == 0:
        return 0
    return cart.subtotal(lines) // count
'''


def shop(rng: random.Random) -> Package:
    name = rng.choice(["shopcart", "basket", "till"])
    cur, tax = rng.choice(["EUR", "USD", "GBP", "CHF"]), rng.choice([5, 7, 8, 10, 20])
    bulk, bulkpct = rng.choice([3, 4, 5, 6]), rng.choice([10, 15, 20, 25])
    subs = dict(CUR=cur, TAX=tax, BULK=bulk, BULKPCT=bulkpct)
    mods = {"money": SHOP_MONEY, "cart": SHOP_CART, "tax": SHOP_TAX,
            "discount": SHOP_DISCOUNT, "checkout": SHOP_CHECKOUT}
    mods = modules_with_init(name, "A shopping cart: prices, tax, discounts and checkout.",
                             {k: fill(v, **subs) for k, v in mods.items()})

    def pct(c: int, p: int) -> int:
        return (c * p + 50) // 100

    def off(c: int, p: int) -> int:
        return c - pct(c, p)

    def label(c: int) -> str:
        return f"{c // 100}.{c % 100:02d} {cur}"

    readme = (f"# {name}\n\nA small shopping cart. Amounts are integer cents in {cur}.\n"
              f"Sales tax is {tax}% except on food and books; orders of {bulk} or more items "
              f"get {bulkpct}% off.\n")
    tests = [
        ("money", "fmt", "fmt", f"fmt(705) == {label(705)!r}"),
        ("money", "percent_off", "percent_off", "percent_off(1000, 10) == 900"),
        ("cart", "subtotal", "subtotal", "subtotal([(100, 2), (50, 1)]) == 250"),
        ("cart", "priciest", "priciest", "priciest([(500, 1), (200, 1), (100, 3)], 2) == [500, 300]"),
        ("tax", "with_tax", "with_tax", f"with_tax(1000, 'general') == {1000 + pct(1000, tax)}"),
        ("discount", "coupon", "coupon", "coupon(1500, 'SAVE5') == 1000"),
        ("checkout", "average_price", "average_price", "average_price([(400, 1), (200, 1)]) == 300"),
    ]
    regression = [
        check("money", "fmt(1250)", label(1250), "money.fmt"),
        check("money", "percent_of(1999, 10)", 200, "money.percent_of"),
        check("cart", "subtotal([(250, 2), (100, 3)])", 800, "cart.subtotal"),
        check("cart", "item_count([(250, 2), (100, 3)])", 5, "cart.item_count"),
        check("tax", "tax_for(1000, 'general')", pct(1000, tax), "tax.tax_for"),
        check("discount", "coupon(2000, 'SAVE5')", 1500, "discount.coupon"),
        check("checkout", "average_price([(300, 2), (100, 1)])", 233, "checkout.average_price"),
        check("checkout", "total([(100, 1)], 'books')", 100,
              "checkout.total", "discount.bulk_price", "tax.with_tax", "tax.tax_for"),
    ]
    bulk_edit = ("    if count >= BULK_MIN:", "    if count > BULK_MIN:")
    sites = [
        Site("wrong_operator", "discount", "discount.bulk_price", (bulk_edit,),
             f"An order of exactly {bulk} items does not get the bulk discount from bulk_price; "
             f"the discount should apply from {bulk} items on.",
             (check("discount", f"bulk_price(1000, {bulk})", off(1000, bulkpct)),
              check("checkout", f"total([(300, {bulk})], 'food')", off(300 * bulk, bulkpct))),
             ("discount", "bulk_at_minimum", "bulk_price",
              f"bulk_price(2000, {bulk}) == {off(2000, bulkpct)}")),
        Site("wrong_import", "discount", "discount.bulk_price",
             (("from .money import percent_off\n", "from .money import percent_of\n"),
              ("        return percent_off(cents, BULK_PERCENT)",
               "        return percent_of(cents, BULK_PERCENT)")),
             "Orders large enough for the bulk discount come out far too cheap: bulk_price "
             "returns only the size of the discount instead of the discounted price.",
             (check("discount", f"bulk_price(1000, {bulk + 1})", off(1000, bulkpct)),
              check("discount", f"bulk_price(4300, {bulk + 3})", off(4300, bulkpct))),
             ("discount", "bulk_large_order", "bulk_price",
              f"bulk_price(2000, {bulk + 2}) == {off(2000, bulkpct)}"), ("money",)),
        Site("off_by_one", "cart", "cart.priciest", (("    return totals[:n]\n", "    return totals[:n - 1]\n"),),
             "cart.priciest(lines, n) returns one line total too few; it should return the n "
             "largest line totals.",
             (check("cart", "priciest([(100, 1), (300, 2), (50, 4)], 2)", [600, 200]),
              check("cart", "priciest([(7, 1), (9, 1)], 1)", [9])),
             ("cart", "priciest_three", "priciest",
              "priciest([(10, 1), (30, 1), (20, 1), (5, 1)], 3) == [30, 20, 10]")),
        Site("renamed_api", "cart", "cart.receipt",
             (("money.fmt(cents)", "money.format_price(cents)"),),
             "cart.receipt() crashes with an AttributeError instead of returning a price label "
             "for every line plus one for the subtotal.",
             (check("cart", "receipt([(250, 2)])", [label(500), label(500)]),
              check("cart", "receipt([(199, 1), (1, 1)])", [label(199), label(1), label(200)])),
             ("cart", "receipt_labels", "receipt",
              f"receipt([(1000, 1)]) == [{label(1000)!r}, {label(1000)!r}]"), ("money",)),
        Site("missing_case", "tax", "tax.tax_for",
             (("    if category in EXEMPT:\n        return 0\n    return percent_of", "    return percent_of"),),
             "Food and books are tax-exempt, but with_tax still adds sales tax to them; exempt "
             "items should come back with no tax.",
             (check("tax", "tax_for(2500, 'food')", 0),
              check("tax", "with_tax(1234, 'books')", 1234)),
             ("tax", "exempt_food", "with_tax", "with_tax(1000, 'food') == 1000")),
        Site("missing_case", "checkout", "checkout.average_price",
             (("    if count == 0:\n        return 0\n    return cart", "    return cart"),),
             "checkout.average_price raises ZeroDivisionError for an empty cart; it should "
             "return 0 then.",
             (check("checkout", "average_price([])", 0),
              check("checkout", "average_price([(100, 0)])", 0)),
             ("checkout", "average_empty", "average_price", "average_price([]) == 0")),
        Site("wrong_default", "tax", "tax.with_tax",
             (('def with_tax(cents, category="general"):', 'def with_tax(cents, category="food"):'),),
             f"with_tax(cents) called without a category adds no tax; items are general goods "
             f"by default and should be taxed at {tax}%.",
             (check("tax", "with_tax(2000)", 2000 + pct(2000, tax)),
              check("tax", "with_tax(999)", 999 + pct(999, tax))),
             ("tax", "default_category", "with_tax", f"with_tax(500) == {500 + pct(500, tax)}")),
        Site("broken_edge_case", "discount", "discount.coupon",
             (("    return max(cents - COUPONS.get(code, 0), 0)", "    return cents - COUPONS.get(code, 0)"),),
             "A coupon worth more than the order makes coupon() return a negative price; "
             "the price should never go below zero.",
             (check("discount", "coupon(300, 'SAVE5')", 0),
              check("discount", "coupon(999, 'SAVE10')", 0)),
             ("discount", "coupon_floor", "coupon", "coupon(100, 'SAVE5') == 0")),
    ]
    return Package(name, mods, readme, tests, regression, sites)


# --------------------------------------------------------------------------- text toolkit

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


# --------------------------------------------------------------------------- grade book

GRADE_STATS = """\
\"\"\"Statistics over lists of numbers.\"\"\"


def mean(values):
    \"\"\"Arithmetic mean; 0.0 for no values.\"\"\"
    if not values:
        return 0.0
    return sum(values) / len(values)


def median(values):
    \"\"\"Middle value; the mean of the two middle values for an even count.\"\"\"
    s = sorted(values)
    mid = len(s) // 2
    if len(s) % 2:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2


def spread(values):
    \"\"\"Largest minus smallest value.\"\"\"
    return max(values) - min(values)
"""

GRADE_GRADES = """\
\"\"\"Letter grades from scores.\"\"\"

CUTOFFS = [(@A@, "A"), (@B@, "B"), (@C@, "C"), (@D@, "D")]


def letter(score):
    \"\"\"Letter grade for `score`; None (not handed in) gives 'I' for incomplete.\"\"\"
    if score is None:
        return "I"
    for cutoff, grade in CUTOFFS:
        if score >= cutoff:
            return grade
    return "F"


def letter_counts(scores):
    \"\"\"letter -> how many scores earned it.\"\"\"
    counts = {}
    for score in scores:
        grade = letter(score)
        counts[grade] = counts.get(grade, 0) + 1
    return counts
"""

GRADE_CURVE = """\
\"\"\"Curving: shift scores so the class mean hits a target.\"\"\"

import math

from .stats import mean

TARGET_MEAN = @TARGET@


def curve(scores, cap=100):
    \"\"\"Scores shifted so their mean is TARGET_MEAN, rounded half up, at most `cap`.\"\"\"
    shift = TARGET_MEAN - mean(scores)
    return [min(math.floor(s + shift + 0.5), cap) for s in scores]
"""

GRADE_REPORT = """\
\"\"\"Class reports.\"\"\"

from . import stats
from .stats import mean


def class_average(scores):
    \"\"\"Mean score rounded to 2 places.\"\"\"
    return round(mean(scores), 2)


def score_range(scores):
    \"\"\"Best minus worst score.\"\"\"
    return stats.spread(scores)
"""


def grades(rng: random.Random) -> Package:
    name = rng.choice(["gradebook", "marks", "classroom"])
    a = rng.choice([90, 88, 85])
    step = rng.choice([10, 8, 5])
    cut = [a, a - step, a - 2 * step, a - 3 * step]
    target = rng.choice([70, 72, 75, 78])
    subs = dict(A=cut[0], B=cut[1], C=cut[2], D=cut[3], TARGET=target)
    mods = {"stats": GRADE_STATS, "grades": GRADE_GRADES, "curve": GRADE_CURVE, "report": GRADE_REPORT}
    mods = modules_with_init(name, "A grade book: statistics, letter grades, curving, reports.",
                             {k: fill(v, **subs) for k, v in mods.items()})

    def curve(scores: list[int], cap: int = 100) -> list[int]:
        shift = target - sum(scores) / len(scores)
        return [min(math.floor(s + shift + 0.5), cap) for s in scores]

    readme = (f"# {name}\n\nGrades: A from {cut[0]}, B from {cut[1]}, C from {cut[2]}, "
              f"D from {cut[3]}, else F. Curving targets a mean of {target}.\n")
    tests = [
        ("stats", "mean", "mean", "mean([1, 2, 3, 6]) == 3"),
        ("stats", "median_even", "median", "median([4, 1, 3, 2]) == 2.5"),
        ("grades", "letter_a", "letter", f"letter({cut[0] + 1}) == 'A'"),
        ("grades", "letter_at_cutoff", "letter", f"letter({cut[1]}) == 'B'"),
        ("curve", "curve", "curve", f"curve([{target - 10}, {target + 10}]) == {curve([target - 10, target + 10])}"),
        ("report", "average", "class_average", "class_average([70, 80, 90, 100]) == 85.0"),
    ]
    regression = [
        check("stats", "median([5, 1, 9])", 5, "stats.median"),
        check("stats", "spread([3, 11, 7])", 8, "stats.spread"),
        check("grades", "letter(0)", "F", "grades.letter"),
        check("grades", f"letter_counts([{cut[0] + 5}, 1, 2])", {"A": 1, "F": 2},
              "grades.letter", "grades.letter_counts"),
        check("report", "score_range([60, 95, 71])", 35, "report.score_range", "stats.spread"),
        check("curve", "curve([50, 60, 70], 200)", curve([50, 60, 70], 200), "curve.curve", "stats.mean"),
        check("report", "class_average([90, 91])", 90.5, "report.class_average", "stats.mean"),
    ]
    big = [target + 20, target + 30, target - 50]
    sites = [
        Site("wrong_operator", "grades", "grades.letter",
             (("        if score >= cutoff:", "        if score > cutoff:"),),
             "A score exactly on a grade boundary gets the lower letter from letter(); "
             "reaching a cutoff should earn that grade.",
             (check("grades", f"letter({cut[0]})", "A"), check("grades", f"letter({cut[3]})", "D")),
             ("grades", "letter_on_boundary", "letter", f"letter({cut[2]}) == 'C'")),
        Site("off_by_one", "stats", "stats.median",
             (("(s[mid - 1] + s[mid]) / 2", "(s[mid] + s[mid + 1]) / 2"),),
             "median() gives wrong results (or IndexError) for an even number of values; it "
             "should average the two middle values.",
             (check("stats", "median([10, 20, 30, 40, 50, 60])", 35.0),
              check("stats", "median([7, 3])", 5.0)),
             ("stats", "median_pair", "median", "median([1, 2, 3, 10]) == 2.5")),
        Site("missing_case", "grades", "grades.letter",
             (('    if score is None:\n        return "I"\n    for cutoff', "    for cutoff"),),
             "letter(None) for a student who has not handed in raises TypeError; it should be "
             "graded 'I' (incomplete).",
             (check("grades", "letter(None)", "I"),
              check("grades", "letter_counts([None, 0])", {"I": 1, "F": 1})),
             ("grades", "letter_incomplete", "letter", "letter(None) == 'I'")),
        Site("wrong_import", "report", "report.class_average",
             (("from .stats import mean\n", "from .stats import median\n"),
              ("round(mean(scores), 2)", "round(median(scores), 2)")),
             "class_average() reports the middle score rather than the average of the scores.",
             (check("report", "class_average([50, 60, 100])", 70.0),
              check("report", "class_average([1, 2, 3, 10])", 4.0)),
             ("report", "average_skewed", "class_average", "class_average([10, 20, 90]) == 40.0"),
             ("stats",)),
        Site("renamed_api", "report", "report.score_range",
             (("stats.spread(scores)", "stats.value_range(scores)"),),
             "score_range() crashes with AttributeError instead of returning the best minus "
             "the worst score.",
             (check("report", "score_range([60, 95, 71])", 35), check("report", "score_range([5])", 0)),
             ("report", "range", "score_range", "score_range([1, 9]) == 8"), ("stats",)),
        Site("wrong_default", "curve", "curve.curve",
             (("def curve(scores, cap=100):", "def curve(scores, cap=99):"),),
             "Curved scores top out at 99 when curve() is called without a cap; the cap "
             "should be 100 by default.",
             (check("curve", f"curve({big})", curve(big)),
              check("curve", f"curve([{target + 40}, {target - 40}])", curve([target + 40, target - 40]))),
             ("curve", "curve_default_cap", "curve", f"curve([{target + 30}, {target - 30}])[0] == 100")),
        Site("broken_edge_case", "stats", "stats.mean",
             (("    if not values:\n        return 0.0\n    return sum", "    return sum"),),
             "mean([]) raises ZeroDivisionError, so class_average of an empty class crashes; "
             "the mean of no values should be 0.0.",
             (check("stats", "mean([])", 0.0), check("report", "class_average([])", 0.0)),
             ("stats", "mean_empty", "mean", "mean([]) == 0.0")),
    ]
    return Package(name, mods, readme, tests, regression, sites)


# --------------------------------------------------------------------------- geometry and units

GEO_UNITS = """\
\"\"\"Length units; lengths inside the package are millimetres.\"\"\"

MM_PER = {"mm": 1, "cm": 10, "m": 1000, "in": 25.4, "ft": 304.8}


def to_mm(value, unit):
    \"\"\"`value` in `unit` as millimetres.\"\"\"
    return value * MM_PER[unit]


def from_mm(value, unit):
    \"\"\"`value` millimetres in `unit`.\"\"\"
    return value / MM_PER[unit]
"""

GEO_VECTORS = """\
\"\"\"2-D points as (x, y) tuples.\"\"\"

import math


def distance(a, b):
    \"\"\"Straight-line distance between points a and b.\"\"\"
    return math.hypot(b[0] - a[0], b[1] - a[1])
"""

GEO_SHAPES = """\
\"\"\"Areas of shapes measured in any unit, in square millimetres.\"\"\"

import math

from .units import to_mm


def rect_area(w, h, unit="@UNIT@"):
    \"\"\"Area of a w x h rectangle given in `unit`.\"\"\"
    return to_mm(w, unit) * to_mm(h, unit)


def circle_area(r, unit="@UNIT@"):
    \"\"\"Area of a circle of radius r given in `unit`.\"\"\"
    return math.pi * to_mm(r, unit) ** 2
"""

GEO_POLYGON = """\
\"\"\"Closed polygons as lists of points.\"\"\"

from . import vectors


def perimeter(points):
    \"\"\"Length around the closed polygon, the closing edge included.\"\"\"
    total = 0.0
    for i in range(len(points)):
        total += vectors.distance(points[i - 1], points[i])
    return total


def bounding_box(points):
    \"\"\"(min_x, min_y, max_x, max_y) of `points`; None for no points.\"\"\"
    if not points:
        return None
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    return (min(xs), min(ys), max(xs), max(ys))


def contains(box, point):
    \"\"\"Whether `point` lies in `box`, its edges included.\"\"\"
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]


def diagonal(points):
    \"\"\"Length of the bounding box's diagonal.\"\"\"
    box = bounding_box(points)
    return vectors.distance((box[0], box[1]), (box[2], box[3]))
"""


def geometry(rng: random.Random) -> Package:
    name = rng.choice(["geokit", "shapes", "measure"])
    unit = rng.choice(["mm", "cm", "m"])
    bad_unit = {"mm": "cm", "cm": "m", "m": "mm"}[unit]
    mods = {"units": GEO_UNITS, "vectors": GEO_VECTORS, "shapes": GEO_SHAPES, "polygon": GEO_POLYGON}
    mods = modules_with_init(name, "Geometry with units: lengths, areas, polygons.",
                             {k: fill(v, UNIT=unit) for k, v in mods.items()})
    mm = {"mm": 1, "cm": 10, "m": 1000, "in": 25.4, "ft": 304.8}
    readme = (f"# {name}\n\nUnits: mm, cm, m, in, ft. Areas come back in mm^2; shapes take "
              f"sizes in {unit} by default.\n")
    side = rng.choice([2, 3, 4, 5, 6, 7])
    sq = [(0, 0), (side, 0), (side, side), (0, side)]
    tests = [
        ("units", "to_mm", "to_mm", "to_mm(3, 'cm') == 30"),
        ("units", "from_mm", "from_mm", "from_mm(2500, 'm') == 2.5"),
        ("vectors", "distance", "distance", "distance((0, 0), (3, 4)) == 5.0"),
        ("shapes", "rect", "rect_area", f"rect_area({side}, 3, 'mm') == {side * 3}"),
        ("polygon", "perimeter", "perimeter", "perimeter([(0, 0), (4, 0), (4, 3)]) == 12.0"),
        ("polygon", "box", "bounding_box", "bounding_box([(1, 5), (3, 2)]) == (1, 2, 3, 5)"),
    ]
    regression = [
        check("units", "to_mm(2, 'in')", 50.8, "units.to_mm"),
        check("units", "from_mm(300, 'cm')", 30.0, "units.from_mm"),
        check("vectors", "distance((1, 1), (4, 5))", 5.0, "vectors.distance"),
        check("polygon", "bounding_box([(2, 3), (-1, 7)])", [-1, 3, 2, 7], "polygon.bounding_box"),
        check("polygon", "contains((0, 0, 4, 4), (1, 2))", True, "polygon.contains"),
        check("shapes", "rect_area(3, 4, 'mm')", 12, "shapes.rect_area", "units.to_mm"),
    ]
    sites = [
        Site("wrong_operator", "polygon", "polygon.contains",
             (("box[0] <= point[0] <= box[2]", "box[0] < point[0] < box[2]"),),
             "contains(box, point) says points on the edge of a box are outside; edges count "
             "as inside.",
             (check("polygon", f"contains((0, 0, {side}, {side}), ({side}, 1))", True),
              check("polygon", "contains((1, 1, 5, 5), (1, 1))", True)),
             ("polygon", "contains_edge", "contains", "contains((0, 0, 2, 2), (0, 1))")),
        Site("off_by_one", "polygon", "polygon.perimeter",
             (("    for i in range(len(points)):", "    for i in range(1, len(points)):"),),
             "perimeter() comes out short: it leaves out the edge from the last point back to "
             "the first.",
             (check("polygon", f"perimeter({sq})", 4.0 * side),
              check("polygon", "perimeter([(0, 0), (6, 0), (6, 8)])", 24.0)),
             ("polygon", "perimeter_square", "perimeter", "perimeter([(0, 0), (1, 0), (1, 1), (0, 1)]) == 4.0")),
        Site("missing_case", "units", "units.to_mm",
             (('"in": 25.4, "ft": 304.8}', '"in": 25.4}'),),
             "Lengths in feet ('ft') raise KeyError in to_mm and from_mm, although feet are a "
             "supported unit (1 ft = 304.8 mm).",
             (check("units", "to_mm(10, 'ft')", 3048.0), check("units", "from_mm(609.6, 'ft')", 2.0)),
             ("units", "feet", "to_mm", "to_mm(1, 'ft') == 304.8")),
        Site("wrong_import", "shapes", "shapes.rect_area",
             (("from .units import to_mm\n", "from .units import from_mm\n"),
              ("    return to_mm(w, unit) * to_mm(h, unit)", "    return from_mm(w, unit) * from_mm(h, unit)"),
              ("math.pi * to_mm(r, unit)", "math.pi * from_mm(r, unit)")),
             "rect_area and circle_area give wildly wrong areas for sizes in cm or m; areas "
             "should be in square millimetres.",
             (check("shapes", "rect_area(2, 3, 'cm')", 600), check("shapes", "round(circle_area(1, 'm'), 3)",
                                                                   round(math.pi * 1000 ** 2, 3))),
             ("shapes", "rect_cm", "rect_area", "rect_area(1, 1, 'cm') == 100"), ("units",)),
        Site("renamed_api", "polygon", "polygon.diagonal",
             (("    return vectors.distance((box[0]", "    return vectors.dist((box[0]"),),
             "diagonal() raises AttributeError instead of returning the length of the "
             "bounding box's diagonal.",
             (check("polygon", "diagonal([(0, 0), (6, 8)])", 10.0),
              check("polygon", "diagonal([(1, 1), (4, 2), (2, 5)])", 5.0)),
             ("polygon", "diagonal", "diagonal", "diagonal([(0, 0), (3, 4)]) == 5.0"), ("vectors",)),
        Site("wrong_default", "shapes", "shapes.rect_area",
             ((f'def rect_area(w, h, unit="{unit}"):', f'def rect_area(w, h, unit="{bad_unit}"):'),),
             f"rect_area(w, h) without a unit should treat sizes as {unit}, as the README says, "
             f"but the area comes out wrong.",
             (check("shapes", "rect_area(2, 5)", 2 * mm[unit] * 5 * mm[unit]),
              check("shapes", "rect_area(7, 1)", 7 * mm[unit] * 1 * mm[unit])),
             ("shapes", "rect_default_unit", "rect_area", f"rect_area(1, 1) == {mm[unit] ** 2}")),
        Site("broken_edge_case", "polygon", "polygon.bounding_box",
             (("    if not points:\n        return None\n    xs", "    xs"),),
             "bounding_box([]) raises ValueError; a polygon with no points has no box and "
             "should give None.",
             (check("polygon", "bounding_box([])", None), check("polygon", "bounding_box(())", None)),
             ("polygon", "box_empty", "bounding_box", "bounding_box([]) is None")),
    ]
    return Package(name, mods, readme, tests, regression, sites)


# --------------------------------------------------------------------------- bank ledger

BANK_AMOUNTS = """\
\"\"\"Amounts are integer cents; helpers to divide them.\"\"\"


def round_half_up(num, den):
    \"\"\"num / den rounded half up to an integer.\"\"\"
    return (2 * num + den) // (2 * den)


def floor_div(num, den):
    \"\"\"num / den rounded down to an integer.\"\"\"
    return num // den


def fmt_amount(cents):
    \"\"\"'12.50' style label, with a leading '-' for negatives.\"\"\"
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"
"""

BANK_ACCOUNT = """\
\"\"\"Balances and withdrawals; a transaction is a dict with 'kind', 'amount' and 'day'.\"\"\"

OVERDRAFT_LIMIT = @OD@


def make(kind, cents, day):
    \"\"\"A transaction; deposits add money, withdrawals and fees take it away.\"\"\"
    if kind == "deposit":
        signed = cents
    elif kind == "withdrawal":
        signed = -cents
    elif kind == "fee":
        signed = -cents
    else:
        raise ValueError(f"unknown kind: {kind}")
    return {"kind": kind, "amount": signed, "day": day}


def balance(transactions):
    \"\"\"Sum of the signed amounts.\"\"\"
    return sum(t["amount"] for t in transactions)


def can_withdraw(transactions, cents):
    \"\"\"Whether withdrawing `cents` keeps the balance at or above -OVERDRAFT_LIMIT.\"\"\"
    return balance(transactions) - cents >= -OVERDRAFT_LIMIT
"""

BANK_INTEREST = """\
\"\"\"Monthly interest at a yearly percentage rate.\"\"\"

from .amounts import round_half_up

RATE_PERCENT = @RATE@


def monthly_interest(balance_cents):
    \"\"\"One month's interest, rounded half up to the cent; none on a balance at or below 0.\"\"\"
    if balance_cents <= 0:
        return 0
    return round_half_up(balance_cents * RATE_PERCENT, 1200)
"""

BANK_STATEMENT = """\
\"\"\"Statements: recent transactions and printable lines.\"\"\"

from . import amounts


def recent(transactions, n=@RECENT@):
    \"\"\"The last `n` transactions (@RECENT@ by default), oldest first.\"\"\"
    return transactions[max(len(transactions) - n, 0):]


def lines(transactions):
    \"\"\"'day kind amount' for each transaction.\"\"\"
    return [f"{t['day']} {t['kind']} {amounts.fmt_amount(t['amount'])}" for t in transactions]
"""


def bank(rng: random.Random) -> Package:
    name = rng.choice(["ledger", "bankbook", "accounts"])
    od, rate, n = rng.choice([0, 5000, 10000]), rng.choice([3, 4, 5, 6]), rng.choice([3, 4, 5])
    mods = {"amounts": BANK_AMOUNTS, "account": BANK_ACCOUNT, "interest": BANK_INTEREST,
            "statement": BANK_STATEMENT}
    mods = modules_with_init(name, "A bank ledger: transactions, balances, interest, statements.",
                             {k: fill(v, OD=od, RATE=rate, RECENT=n) for k, v in mods.items()})
    readme = (f"# {name}\n\nAmounts are cents. Overdraft limit {od}; yearly interest {rate}%; "
              f"statements show the last {n} transactions.\n")
    interest = lambda b: (2 * b * rate + 1200) // 2400 if b > 0 else 0  # noqa: E731
    # balances whose interest has a remainder of at least half a cent, so rounding matters
    halves = [b for b in range(1000, 200000, 37) if (b * rate) % 1200 >= 600][:3]
    txs = [{"kind": "deposit", "amount": 100 * (i + 1), "day": i + 1} for i in range(n + 3)]
    tests = [
        ("amounts", "fmt", "fmt_amount", "fmt_amount(-705) == '-7.05'"),
        ("amounts", "half_up", "round_half_up", "round_half_up(5, 2) == 3"),
        ("account", "balance", "make", "make('deposit', 500, 1)['amount'] == 500"),
        ("account", "withdraw", "can_withdraw", f"can_withdraw([], {od})"),
        ("interest", "interest", "monthly_interest", "monthly_interest(0) == 0"),
        ("statement", "recent", "recent", "recent([1, 2, 3, 4, 5, 6], 2) == [5, 6]"),
    ]
    regression = [
        check("amounts", "fmt_amount(123456)", "1234.56", "amounts.fmt_amount"),
        check("amounts", "floor_div(7, 2)", 3, "amounts.floor_div"),
        check("account", "make('withdrawal', 300, 2)", {"kind": "withdrawal", "amount": -300, "day": 2},
              "account.make"),
        check("account", "balance([{'amount': 5}, {'amount': -2}])", 3, "account.balance"),
        check("statement", "recent([1, 2, 3, 4, 5, 6, 7], 3)", [5, 6, 7], "statement.recent"),
        check("interest", "monthly_interest(-500)", 0, "interest.monthly_interest"),
    ]
    sites = [
        Site("wrong_operator", "account", "account.can_withdraw",
             (("balance(transactions) - cents >=", "balance(transactions) + cents >="),),
             f"can_withdraw allows withdrawals that would take the balance beyond the "
             f"overdraft limit of {od} cents.",
             (check("account", f"can_withdraw([], {od + 1})", False),
              check("account", f"can_withdraw([{{'amount': 1000}}], {od + 1001})", False)),
             ("account", "withdraw_too_much", "can_withdraw", f"not can_withdraw([], {od + 500})")),
        Site("off_by_one", "statement", "statement.recent",
             (("len(transactions) - n, 0)", "len(transactions) - n + 1, 0)"),),
             "statement.recent() returns one transaction fewer than asked for.",
             (check("statement", f"len(recent({txs}))", n),
              check("statement", "recent(['a', 'b', 'c'], 2)", ["b", "c"])),
             ("statement", "recent_three", "recent", "recent([1, 2, 3, 4], 3) == [2, 3, 4]")),
        Site("missing_case", "account", "account.make",
             (('    elif kind == "fee":\n        signed = -cents\n    else', "    else"),),
             "Recording a bank fee with make('fee', ...) raises ValueError; fees should be "
             "recorded as money leaving the account.",
             (check("account", "make('fee', 250, 3)", {"kind": "fee", "amount": -250, "day": 3}),
              check("account", "make('fee', 1, 9)['amount']", -1)),
             ("account", "fee", "make", "make('fee', 100, 1)['amount'] == -100")),
        Site("wrong_import", "interest", "interest.monthly_interest",
             (("from .amounts import round_half_up\n", "from .amounts import floor_div\n"),
              ("    return round_half_up(balance_cents", "    return floor_div(balance_cents")),
             "monthly_interest rounds half a cent or more down instead of up, so customers are "
             "short-changed by a cent in many months.",
             tuple(check("interest", f"monthly_interest({b})", interest(b)) for b in halves[1:]),
             ("interest", "rounds_half_up", "monthly_interest",
              f"monthly_interest({halves[0]}) == {interest(halves[0])}"), ("amounts",)),
        Site("renamed_api", "statement", "statement.lines",
             (("amounts.fmt_amount(t['amount'])", "amounts.format_cents(t['amount'])"),),
             "statement.lines() crashes with AttributeError instead of printing one "
             "'day kind amount' line per transaction.",
             (check("statement", "lines([{'day': 2, 'kind': 'fee', 'amount': -150}])", ["2 fee -1.50"]),
              check("statement", "lines([{'day': 9, 'kind': 'deposit', 'amount': 5}])", ["9 deposit 0.05"])),
             ("statement", "lines", "lines",
              "lines([{'day': 1, 'kind': 'deposit', 'amount': 1000}]) == ['1 deposit 10.00']"),
             ("amounts",)),
        Site("wrong_default", "statement", "statement.recent",
             ((f"def recent(transactions, n={n}):", f"def recent(transactions, n={n + 2}):"),),
             f"recent(transactions) without n should return the last {n} transactions, as "
             f"documented, but returns more.",
             (check("statement", f"recent({txs})", txs[-n:]),
              check("statement", f"len(recent(list(range(20))))", n)),
             ("statement", "recent_default", "recent", f"recent(list(range(10))) == {list(range(10))[-n:]}")),
        Site("broken_edge_case", "interest", "interest.monthly_interest",
             (("    if balance_cents <= 0:\n        return 0\n    return round", "    return round"),),
             "An overdrawn account earns negative interest from monthly_interest; a balance at "
             "or below zero should earn none.",
             (check("interest", "monthly_interest(-120000)", 0), check("interest", "monthly_interest(-60000)", 0)),
             ("interest", "overdrawn", "monthly_interest", "monthly_interest(-50000) == 0")),
    ]
    return Package(name, mods, readme, tests, regression, sites)


# --------------------------------------------------------------------------- calendar and scheduler

CAL_CLOCK = """\
\"\"\"Times of day as minutes after midnight.\"\"\"


def parse_time(text):
    \"\"\"'09:30' -> 570.\"\"\"
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


def fmt_time(minutes):
    \"\"\"570 -> '09:30'.\"\"\"
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def fmt_duration(minutes):
    \"\"\"90 -> '1h30m'.\"\"\"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def add_minutes(time, minutes):
    \"\"\"`time` plus `minutes`, wrapping past midnight.\"\"\"
    return (time + minutes) % 1440
"""

CAL_DATES = """\
\"\"\"Calendar arithmetic.\"\"\"

DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def is_leap(year):
    \"\"\"Gregorian leap year: every 4th year, except centuries not divisible by 400.\"\"\"
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0


def days_in_month(year, month):
    \"\"\"Days in `month` (1-12) of `year`.\"\"\"
    if month == 2 and is_leap(year):
        return 29
    return DAYS[month - 1]


def day_of_year(year, month, day):
    \"\"\"1 for January 1st.\"\"\"
    return sum(days_in_month(year, m) for m in range(1, month)) + day
"""

CAL_SLOTS = """\
\"\"\"Meetings are (start, end) minute pairs.\"\"\"

from . import clock
from .clock import fmt_time

SLOT_MINUTES = @SLOT@


def overlaps(a, b):
    \"\"\"Whether meetings a and b overlap; one ending as the other starts does not.\"\"\"
    return a[0] < b[1] and b[0] < a[1]


def free_slots(busy, day_start, day_end, length=SLOT_MINUTES):
    \"\"\"Start times of free `length`-minute slots from day_start, stepping by `length`.\"\"\"
    out = []
    t = day_start
    while t + length <= day_end:
        if not any(overlaps((t, t + length), b) for b in busy):
            out.append(t)
        t += length
    return out


def labels(meetings):
    \"\"\"'HH:MM-HH:MM' for each meeting.\"\"\"
    return [f"{fmt_time(a)}-{fmt_time(b)}" for a, b in meetings]


def end_time(start, minutes):
    \"\"\"'HH:MM' at which a meeting of `minutes` starting at `start` ends.\"\"\"
    return clock.fmt_time(clock.add_minutes(start, minutes))
"""


def calendar(rng: random.Random) -> Package:
    name = rng.choice(["planner", "agenda", "cronlite"])
    slot = rng.choice([15, 20, 30, 45])
    mods = {"clock": CAL_CLOCK, "dates": CAL_DATES, "slots": CAL_SLOTS}
    mods = modules_with_init(name, "A day planner: clock times, dates and meeting slots.",
                             {k: fill(v, SLOT=slot) for k, v in mods.items()})
    readme = f"# {name}\n\nTimes are minutes after midnight. Free slots are {slot} minutes long.\n"
    year = rng.choice([2021, 2022, 2023, 2025])
    leap = rng.choice([2024, 2028, 2000])

    def hm(m: int) -> str:
        return f"{m // 60:02d}:{m % 60:02d}"

    tests = [
        ("clock", "parse", "parse_time", "parse_time('09:30') == 570"),
        ("clock", "fmt", "fmt_time", "fmt_time(65) == '01:05'"),
        ("dates", "leap", "is_leap", f"is_leap({leap}) and not is_leap({year})"),
        ("dates", "doy", "day_of_year", f"day_of_year({year}, 1, 5) == 5"),
        ("slots", "overlap", "overlaps", "overlaps((60, 120), (90, 150))"),
        ("slots", "labels", "labels", "labels([(540, 600)]) == ['09:00-10:00']"),
    ]
    regression = [
        check("clock", "parse_time('23:59')", 1439, "clock.parse_time"),
        check("clock", "fmt_duration(135)", "2h15m", "clock.fmt_duration"),
        check("dates", f"days_in_month({year}, 4)", 30, "dates.days_in_month"),
        check("slots", "overlaps((0, 30), (100, 200))", False, "slots.overlaps"),
        check("slots", "labels([(0, 90)])", ["00:00-01:30"], "slots.labels"),
        check("dates", f"is_leap({leap})", True, "dates.is_leap"),
    ]
    day_start = 540
    sites = [
        Site("wrong_operator", "slots", "slots.overlaps",
             (("    return a[0] < b[1] and b[0] < a[1]", "    return a[0] <= b[1] and b[0] <= a[1]"),),
             "overlaps() reports back-to-back meetings (one ends as the next starts) as "
             "overlapping; they do not overlap.",
             (check("slots", "overlaps((600, 660), (660, 700))", False),
              check("slots", f"free_slots([(0, {day_start})], {day_start}, {day_start + slot})", [day_start])),
             ("slots", "back_to_back", "overlaps", "not overlaps((60, 120), (0, 60))")),
        Site("off_by_one", "dates", "dates.day_of_year",
             (("for m in range(1, month))", "for m in range(1, month + 1))"),),
             "day_of_year gives dates after January a number a whole month too large; "
             "January 1st is day 1.",
             (check("dates", f"day_of_year({year}, 2, 1)", 32),
              check("dates", f"day_of_year({year}, 12, 31)", 365)),
             ("dates", "doy_march", "day_of_year", f"day_of_year({year}, 3, 1) == 60")),
        Site("missing_case", "dates", "dates.is_leap",
             (("    if year % 100 == 0:\n        return False\n    return year", "    return year"),),
             "is_leap treats century years such as 1900 as leap years; only centuries "
             "divisible by 400 are.",
             (check("dates", "is_leap(2100)", False), check("dates", "days_in_month(1800, 2)", 28)),
             ("dates", "century", "is_leap", "not is_leap(1900)")),
        Site("wrong_import", "slots", "slots.labels",
             (("from .clock import fmt_time\n", "from .clock import fmt_duration\n"),
              ('f"{fmt_time(a)}-{fmt_time(b)}"', 'f"{fmt_duration(a)}-{fmt_duration(b)}"')),
             "labels() prints meetings as durations like '9h00m-10h00m' instead of clock "
             "times like '09:00-10:00'.",
             (check("slots", "labels([(615, 700)])", [f"{hm(615)}-{hm(700)}"]),
              check("slots", "labels([(0, 5), (60, 61)])", ["00:00-00:05", "01:00-01:01"])),
             ("slots", "labels_clock", "labels", "labels([(480, 500)]) == ['08:00-08:20']"), ("clock",)),
        Site("renamed_api", "slots", "slots.end_time",
             (("    return clock.fmt_time(clock.add_minutes", "    return clock.format_time(clock.add_minutes"),),
             "end_time() raises AttributeError instead of returning the clock time at which "
             "a meeting ends.",
             (check("slots", "end_time(600, 45)", "10:45"), check("slots", "end_time(0, 1)", "00:01")),
             ("slots", "end_time", "end_time", "end_time(540, 30) == '09:30'"), ("clock",)),
        Site("wrong_default", "slots", "slots.free_slots",
             (("day_end, length=SLOT_MINUTES):", "day_end, length=60):"),),
             f"free_slots without a length should list {slot}-minute slots, as the README says, "
             f"but the slots come out an hour long.",
             (check("slots", f"free_slots([], 600, {600 + 2 * slot})", [600, 600 + slot]),
              check("slots", f"len(free_slots([], 0, {slot * 4}))", 4)),
             ("slots", "free_default", "free_slots", f"free_slots([], 0, {slot}) == [0]")),
        Site("broken_edge_case", "clock", "clock.add_minutes",
             (("    return (time + minutes) % 1440", "    return time + minutes"),),
             "Adding minutes past midnight gives times such as '24:10' (end_time, add_minutes); "
             "times should wrap round to the next day.",
             (check("clock", "add_minutes(1430, 20)", 10), check("slots", "end_time(1380, 90)", "00:30")),
             ("clock", "wrap_midnight", "add_minutes", "add_minutes(1439, 2) == 1")),
    ]
    return Package(name, mods, readme, tests, regression, sites)


TEMPLATES: list[Callable[[random.Random], Package]] = [shop, text, grades, geometry, bank, calendar]
