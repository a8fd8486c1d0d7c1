"""Package template: a shopping cart: money, cart, tax, discount, checkout."""

from __future__ import annotations

import random

from flywheel.families.repository.repo_templates.base import Package, Site, check, fill, modules_with_init  # noqa: F401


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
