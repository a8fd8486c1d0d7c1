"""Package template: a bank ledger: amounts, account, interest, statement."""

from __future__ import annotations

import random

from flywheel.families.repository.repo_templates.base import Package, Site, check, fill, modules_with_init  # noqa: F401


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
