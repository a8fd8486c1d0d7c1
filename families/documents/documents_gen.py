"""Generated financial reports whose figures are consistent by construction.

    report = make_report(random.Random("0:doc_fields:train:7"), size="long")
    report.facts["revenue_2025"]      # every named figure, in the report's own scale
    report.statements[0].rows         # income statement, balance sheet, cash flow, segments

Why built from a model rather than drawn line by line: derived figures (totals, margins, growth)
are only well defined when the document agrees with itself. Here every total is a sum, the
balance sheet balances (cash is the plug of assets = liabilities + equity), retained earnings
roll forward by net income less dividends, PP&E by capital expenditure less depreciation, and
the cash flow statement is derived from the balance sheets, so its net change equals the change
in cash. A hidden year before the first shown one gives every shown year a prior balance.
Notes (PP&E, debt and its maturities, taxes, leases, headcount) restate or break down the same
figures. Rendering is elsewhere (documents_text.py, documents_pdf.py); this module only decides
what is true. All arithmetic is on integers of the report's scale, so nothing depends on floats.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

COMPANIES = ["Halvard Instruments", "Corvina Foods", "Pellucid Networks", "Ostrava Mining",
             "Brightwater Utilities", "Kestrel Logistics", "Marrow & Finch", "Quillon Software",
             "Tamsin Apparel", "Veridian Chemicals", "Lumen Harbor Holdings", "Ardent Robotics"]
SEGMENTS = ["Industrial", "Consumer", "Services", "Software", "Healthcare", "Energy", "Retail",
            "Aerospace", "Logistics", "Licensing"]
CURRENCIES = [("USD", "$", "US dollars"), ("EUR", "€", "euros"), ("GBP", "£", "pounds sterling")]
SCALES = {"thousands": 1_000, "millions": 1_000_000}
SIZES = ("short", "medium", "long")
NOTES = {"segments": 2, "ppe": 3, "debt": 4, "tax": 5, "leases": 6, "people": 7}  # note numbers
PARTS = ("income", "balance", "cash", *NOTES)


@dataclass(frozen=True)
class Row:
    """One line of a table: a fact key (facts are `{key}_{year}`), its label, its value per
    shown year, whether it is a total line, and the note it refers to."""
    key: str
    label: str
    values: tuple[int, ...]
    total: bool = False
    note: int | None = None


@dataclass(frozen=True)
class Table:
    title: str
    rows: tuple[Row, ...]
    kind: str = "balance"          # "flow" (for the year ended) or "balance" (at year end)


@dataclass
class Report:
    """What a generated report says: its tables, the facts they and the notes state (name ->
    value in the report's scale, or a plain number for rates and counts), and the notes' data."""
    company: str
    currency: tuple[str, str, str]
    scale: str
    years: tuple[int, ...]
    size: str
    statements: list[Table]
    facts: dict[str, int | float] = field(default_factory=dict)
    notes: dict[str, object] = field(default_factory=dict)
    parts: tuple[str, ...] = PARTS
    where: dict[str, set[str]] = field(default_factory=dict)   # fact -> the parts stating it

    @property
    def last(self) -> int:
        return self.years[-1]

    def shown(self) -> dict[str, int | float]:
        """The facts the rendered document states: those of its included parts."""
        return {name: v for name, v in self.facts.items() if self.where[name] & set(self.parts)}

    def state(self, part: str, facts: dict[str, int | float]) -> None:
        """Record `facts` as stated by `part` (a fact may be stated by several)."""
        self.facts.update(facts)
        for name in facts:
            self.where.setdefault(name, set()).add(part)


def _pct(rng: random.Random, low: float, high: float) -> float:
    return rng.uniform(low, high)


def _year_figures(rng: random.Random, n: int, base: int) -> list[dict[str, int]]:
    """The model's n+1 years (the first hidden): every line item, integers of the scale."""
    years, revenue = [], base
    debt_rate, tax_rate, payout = _pct(rng, 0.03, 0.08), _pct(rng, 0.15, 0.30), _pct(rng, 0.0, 0.4)
    common_stock = round(base * _pct(rng, 0.05, 0.2))
    for t in range(n + 1):
        if t:
            revenue = round(revenue * (1 + _pct(rng, -0.12, 0.28)))
        y: dict[str, int] = {"revenue": revenue}
        y["cost_of_revenue"] = round(revenue * _pct(rng, 0.35, 0.65))
        y["gross_profit"] = revenue - y["cost_of_revenue"]
        y["research_and_development"] = round(revenue * _pct(rng, 0.02, 0.12))
        y["selling_general_admin"] = round(revenue * _pct(rng, 0.08, 0.2))
        y["total_operating_expenses"] = y["research_and_development"] + y["selling_general_admin"]
        y["operating_income"] = y["gross_profit"] - y["total_operating_expenses"]
        prior = years[-1] if years else None
        debt_before = (prior["short_term_debt"] + prior["long_term_debt"]) if prior else round(base * 0.4)
        y["interest_expense"] = round(debt_before * debt_rate)
        y["other_income"] = round(revenue * _pct(rng, -0.01, 0.015))
        y["income_before_tax"] = y["operating_income"] - y["interest_expense"] + y["other_income"]
        y["income_tax"] = max(0, round(y["income_before_tax"] * tax_rate * _pct(rng, 0.9, 1.1)))
        y["net_income"] = y["income_before_tax"] - y["income_tax"]
        y["dividends"] = round(max(0, y["net_income"]) * payout)
        # balance sheet, cash last (the plug)
        y["accounts_receivable"] = round(revenue * _pct(rng, 0.08, 0.2))
        y["inventories"] = round(y["cost_of_revenue"] * _pct(rng, 0.1, 0.3))
        y["prepaid_and_other"] = round(revenue * _pct(rng, 0.01, 0.04))
        y["depreciation"] = round(revenue * _pct(rng, 0.02, 0.06))
        if prior:
            capex = max(1, round(y["depreciation"] * _pct(rng, 0.6, 1.8)))
            y["ppe_net"] = prior["ppe_net"] + capex - y["depreciation"]
            y["accumulated_depreciation"] = prior["accumulated_depreciation"] + y["depreciation"]
            y["goodwill"] = prior["goodwill"] + (round(revenue * _pct(rng, 0, 0.05)) if rng.random() < 0.3 else 0)
            y["intangibles"] = prior["intangibles"] + round(revenue * _pct(rng, 0, 0.01))
            y["retained_earnings"] = prior["retained_earnings"] + y["net_income"] - y["dividends"]
        else:
            y["ppe_net"] = round(revenue * _pct(rng, 0.2, 0.5))
            y["accumulated_depreciation"] = round(y["ppe_net"] * _pct(rng, 0.3, 0.8))
            y["goodwill"] = round(revenue * _pct(rng, 0.0, 0.25))
            y["intangibles"] = round(revenue * _pct(rng, 0.02, 0.08))
            y["retained_earnings"] = round(revenue * _pct(rng, 0.2, 0.6))
        y["ppe_gross"] = y["ppe_net"] + y["accumulated_depreciation"]
        y["accounts_payable"] = round(y["cost_of_revenue"] * _pct(rng, 0.08, 0.2))
        y["accrued_liabilities"] = round(revenue * _pct(rng, 0.03, 0.08))
        y["short_term_debt"] = round(revenue * _pct(rng, 0.01, 0.06))
        y["long_term_debt"] = round(revenue * _pct(rng, 0.1, 0.45))
        y["other_liabilities"] = round(revenue * _pct(rng, 0.02, 0.06))
        y["common_stock"] = common_stock
        _balance(rng, y)
        years.append(y)
    return years


def _balance(rng: random.Random, y: dict[str, int]) -> None:
    """Totals, with cash as the plug; where cash would fall below a floor, long-term debt grows
    (the company borrowed) until it does not."""
    floor = round(y["revenue"] * _pct(rng, 0.03, 0.1)) + 1
    while True:
        y["total_current_liabilities"] = y["accounts_payable"] + y["accrued_liabilities"] + y["short_term_debt"]
        y["total_liabilities"] = y["total_current_liabilities"] + y["long_term_debt"] + y["other_liabilities"]
        y["total_equity"] = y["common_stock"] + y["retained_earnings"]
        y["total_liabilities_and_equity"] = y["total_liabilities"] + y["total_equity"]
        noncash = (y["accounts_receivable"] + y["inventories"] + y["prepaid_and_other"]
                   + y["ppe_net"] + y["goodwill"] + y["intangibles"])
        y["cash"] = y["total_liabilities_and_equity"] - noncash
        if y["cash"] >= floor:
            break
        y["long_term_debt"] += floor - y["cash"]
    y["total_current_assets"] = y["cash"] + y["accounts_receivable"] + y["inventories"] + y["prepaid_and_other"]
    y["total_assets"] = y["total_current_assets"] + y["ppe_net"] + y["goodwill"] + y["intangibles"]
    y["total_debt"] = y["short_term_debt"] + y["long_term_debt"]
    assert y["total_assets"] == y["total_liabilities_and_equity"]


def _cash_flows(prior: dict[str, int], y: dict[str, int]) -> None:
    """The year's cash flow statement, derived from two balance sheets: it ties to the change in
    cash by the balance identity."""
    working = lambda d: d["accounts_receivable"] + d["inventories"] + d["prepaid_and_other"]  # noqa: E731
    payables = lambda d: d["accounts_payable"] + d["accrued_liabilities"]  # noqa: E731
    y["change_in_working_capital"] = (payables(y) - payables(prior)) - (working(y) - working(prior))
    y["other_operating"] = y["other_liabilities"] - prior["other_liabilities"]
    y["net_cash_operating"] = y["net_income"] + y["depreciation"] + y["change_in_working_capital"] + y["other_operating"]
    y["capital_expenditures"] = y["ppe_net"] - prior["ppe_net"] + y["depreciation"]
    y["acquisitions"] = (y["goodwill"] + y["intangibles"]) - (prior["goodwill"] + prior["intangibles"])
    y["net_cash_investing"] = -y["capital_expenditures"] - y["acquisitions"]
    y["net_borrowings"] = y["total_debt"] - prior["total_debt"]
    y["dividends_paid"] = -y["dividends"]
    y["net_cash_financing"] = y["net_borrowings"] + y["dividends_paid"]
    y["net_change_in_cash"] = y["net_cash_operating"] + y["net_cash_investing"] + y["net_cash_financing"]
    y["free_cash_flow"] = y["net_cash_operating"] - y["capital_expenditures"]
    assert y["net_change_in_cash"] == y["cash"] - prior["cash"]


INCOME = [("revenue", "Revenue", False, 2), ("cost_of_revenue", "Cost of revenue", False, None),
          ("gross_profit", "Gross profit", True, None),
          ("research_and_development", "Research and development", False, None),
          ("selling_general_admin", "Selling, general and administrative", False, None),
          ("total_operating_expenses", "Total operating expenses", True, None),
          ("operating_income", "Operating income", True, None),
          ("interest_expense", "Interest expense", False, 4), ("other_income", "Other income (expense), net", False, None),
          ("income_before_tax", "Income before income taxes", True, None),
          ("income_tax", "Income tax expense", False, 5), ("net_income", "Net income", True, None)]
BALANCE = [("cash", "Cash and cash equivalents", False, None), ("accounts_receivable", "Accounts receivable, net", False, None),
           ("inventories", "Inventories", False, None), ("prepaid_and_other", "Prepaid expenses and other current assets", False, None),
           ("total_current_assets", "Total current assets", True, None),
           ("ppe_net", "Property, plant and equipment, net", False, 3), ("goodwill", "Goodwill", False, None),
           ("intangibles", "Intangible assets, net", False, None), ("total_assets", "Total assets", True, None),
           ("accounts_payable", "Accounts payable", False, None), ("accrued_liabilities", "Accrued liabilities", False, None),
           ("short_term_debt", "Short-term debt", False, 4), ("total_current_liabilities", "Total current liabilities", True, None),
           ("long_term_debt", "Long-term debt", False, 4), ("other_liabilities", "Other long-term liabilities", False, None),
           ("total_liabilities", "Total liabilities", True, None), ("common_stock", "Common stock and paid-in capital", False, None),
           ("retained_earnings", "Retained earnings", False, None), ("total_equity", "Total shareholders' equity", True, None),
           ("total_liabilities_and_equity", "Total liabilities and shareholders' equity", True, None)]
CASH = [("net_income", "Net income", False, None), ("depreciation", "Depreciation", False, 3),
        ("change_in_working_capital", "Changes in working capital", False, None),
        ("other_operating", "Other operating items, net", False, None),
        ("net_cash_operating", "Net cash provided by operating activities", True, None),
        ("capital_expenditures", "Capital expenditures", False, 3), ("acquisitions", "Acquisitions of businesses and intangibles", False, None),
        ("net_cash_investing", "Net cash used in investing activities", True, None),
        ("net_borrowings", "Net borrowings (repayments) of debt", False, 4), ("dividends_paid", "Dividends paid", False, None),
        ("net_cash_financing", "Net cash from financing activities", True, None),
        ("net_change_in_cash", "Net change in cash and cash equivalents", True, None)]
CASH_SIGNS = {"capital_expenditures": -1, "acquisitions": -1}  # shown as outflows, asked as amounts


def _table(title: str, kind: str, lines, shown: list[dict[str, int]], signs: dict | None = None) -> Table:
    signs = signs or {}
    return Table(title, tuple(Row(key, label, tuple(signs.get(key, 1) * y[key] for y in shown), total, note)
                              for key, label, total, note in lines), kind)


def _segments(rng: random.Random, shown: list[dict[str, int]]) -> tuple[list[str], Table]:
    names = rng.sample(SEGMENTS, rng.randint(2, 4))
    weights = [rng.uniform(1, 4) for _ in names]
    rows = []
    for y in shown:
        parts = [round(y["revenue"] * w / sum(weights) * rng.uniform(0.9, 1.1)) for w in weights[:-1]]
        parts.append(y["revenue"] - sum(parts))
        rows.append(parts)
    keys = ["segment_" + n.lower() + "_revenue" for n in names]
    for y, parts in zip(shown, rows):
        y.update(zip(keys, parts))
    table = Table("Revenue by segment", tuple(
        [Row(k, n, tuple(y[k] for y in shown)) for k, n in zip(keys, names)]
        + [Row("revenue", "Total revenue", tuple(y["revenue"] for y in shown), True)]), "flow")
    return names, table


def _notes(rng: random.Random, report: Report, shown: list[dict[str, int]]) -> None:
    """Figures the notes state: PP&E, the debt's composition, rate and maturities, the effective
    tax rate, lease commitments, headcount (the statements' own figures, broken down)."""
    last, years = shown[-1], report.years
    each = lambda keys: {f"{k}_{year}": y[k] for year, y in zip(years, shown) for k in keys}  # noqa: E731
    report.state("ppe", each(["ppe_gross", "accumulated_depreciation", "ppe_net", "depreciation",
                              "capital_expenditures"]))
    debt = {"senior_notes_rate_pct": round(rng.uniform(2.5, 7.5) * 4) / 4}   # e.g. 4.25 (%)
    for year, y in zip(years, shown):
        part = round(y["total_debt"] * rng.uniform(0.3, 0.7))
        debt.update({f"senior_notes_{year}": part, f"term_loan_{year}": y["total_debt"] - part,
                     f"total_debt_{year}": y["total_debt"]})
    maturities, left = [], last["total_debt"]
    for k in range(1, 5):
        part = round(left * rng.uniform(0.05, 0.35))
        maturities.append((str(report.last + k), part))
        left -= part
    maturities.append(("Thereafter", left))
    debt.update({f"debt_maturing_{label.lower()}": amount for label, amount in maturities})
    report.notes["maturities"] = maturities
    report.state("debt", debt)
    tax = each(["income_before_tax", "income_tax"])
    tax.update({f"effective_tax_rate_pct_{year}": round(100 * y["income_tax"] / y["income_before_tax"], 1)
                for year, y in zip(years, shown) if y["income_before_tax"] > 0})
    report.state("tax", tax)
    leases = [(str(report.last + k), round(last["revenue"] * rng.uniform(0.002, 0.02))) for k in range(1, 4)]
    report.notes["leases"] = leases
    report.state("leases", {"lease_commitments_total": sum(a for _, a in leases),
                            **{f"lease_payment_{label}": a for label, a in leases}})
    headcount, people = rng.randint(120, 40_000), {}
    for year in years:
        headcount = max(50, round(headcount * rng.uniform(0.9, 1.15)))
        people[f"headcount_{year}"] = headcount
    report.state("people", people)


def _parts(rng: random.Random, size: str) -> tuple[str, ...]:
    """Which parts a report includes: all but for `short` ones, which hold the income statement
    and two others (about 1-3 KB)."""
    if size != "short":
        return PARTS
    chosen = set(rng.sample([p for p in PARTS if p != "income"], 2))
    return tuple(p for p in PARTS if p == "income" or p in chosen)


def make_report(rng: random.Random, size: str = "medium") -> Report:
    """A consistent report drawn from `rng` (same draws, same report). `size` is how much prose
    surrounds the figures (documents_text.py reads it): short, medium or long."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {SIZES}")
    n = rng.choice((2, 3))
    last = rng.randint(2019, 2026)
    years = tuple(range(last - n + 1, last + 1))
    scale = rng.choice(list(SCALES))
    base = rng.randint(20_000, 3_000_000) if scale == "thousands" else rng.randint(200, 60_000)
    model = _year_figures(rng, n, base)
    for prior, y in zip(model, model[1:]):
        _cash_flows(prior, y)
    shown = model[1:]
    report = Report(rng.choice(COMPANIES), rng.choice(CURRENCIES), scale, years, size, [],
                    parts=_parts(rng, size))
    segment_names, segments = _segments(rng, shown)
    report.statements = [
        _table("Consolidated Statements of Operations", "flow", INCOME, shown),
        _table("Consolidated Balance Sheets", "balance", BALANCE, shown),
        _table("Consolidated Statements of Cash Flows", "flow", CASH, shown, CASH_SIGNS),
        segments]
    for part, table in zip(("income", "balance", "cash", "segments"), report.statements):
        report.state(part, {f"{row.key}_{year}": abs(v) if row.key in CASH_SIGNS else v
                            for row in table.rows for year, v in zip(years, row.values)})
    report.notes["segments"] = segment_names
    report.notes["statutory_rate_pct"] = 21.0
    _notes(rng, report, shown)
    return report
