"""What a document task asks: named fields with their true values, and derived figures with the
arithmetic that ties them to their inputs.

    fields, checks = field_questions(report, rng)     # doc_fields: figures as stated (or rescaled)
    fields, checks = figure_questions(report, rng)    # doc_figures: ratios, growth, totals + inputs

A field is {"name", "question", "value", "tolerance", "unit"}: the verifier
(families/documents/document_fields.py) accepts a number within `tolerance` of `value`. A check is
{"field", "op", "args"}: the response's own `field` must equal `op` over its own `args` fields,
so a derived figure has to agree with the inputs the response reports. Values come from the
report's facts, never from rendered text; rounded figures keep their exact value and a tolerance
of half the last stated decimal, so any correct rounding passes.
"""

from __future__ import annotations

import random

from flywheel.families.documents.documents_gen import BALANCE, CASH, INCOME, Report

OPS = ("sum", "difference", "ratio", "ratio_pct", "change_pct")


def apply_op(op: str, args: list[float]) -> float | None:
    """`op` over `args`; None where undefined (a zero divisor, wrong arity). Plain arithmetic on
    floats: the verifier calls it on the response's numbers, so it never evaluates text."""
    if op == "sum":
        return float(sum(args)) if args else None
    if len(args) != 2:
        return None
    a, b = args
    if op == "difference":
        return float(a - b)
    if b == 0:
        return None
    return {"ratio": a / b, "ratio_pct": 100 * a / b, "change_pct": 100 * (a - b) / b}.get(op)


def tolerance(decimals: int) -> float:
    """Half a unit of the last stated decimal (and float noise): every correct rounding passes."""
    return 0.5 * 10 ** -decimals + 1e-9


LABELS = {key: label for key, label, _, _ in INCOME + BALANCE + CASH}
LABELS.update(capital_expenditures="Capital expenditures (as a positive amount)",
              acquisitions="Acquisitions of businesses and intangibles (as a positive amount)",
              ppe_gross="Property, plant and equipment at cost (gross, Note 3)",
              accumulated_depreciation="Accumulated depreciation (Note 3)",
              senior_notes="Senior notes outstanding (Note 4)", term_loan="Term loan outstanding (Note 4)",
              total_debt="Total debt (Note 4)")
BALANCE_KEYS = {key for key, _, _, _ in BALANCE} | {"ppe_gross", "accumulated_depreciation", "senior_notes",
                                                    "term_loan", "total_debt"}


def describe(report: Report, name: str) -> tuple[str, str]:
    """(question, unit) for fact `name`: unit is "amount" (in the report's scale), "percent" or
    "count"."""
    key, _, year = name.rpartition("_")
    if name == "senior_notes_rate_pct":
        return "the senior notes' fixed interest rate (Note 4), in percent", "percent"
    if name == "lease_commitments_total":
        return "total future minimum lease payments (Note 6)", "amount"
    if key == "debt_maturing":
        return f"debt maturing in {year} (Note 4 maturities; `thereafter` is the later years)", "amount"
    if key == "lease_payment":
        return f"minimum lease payments due in {year} (Note 6)", "amount"
    if key == "headcount":
        return f"number of employees at December 31, {year}", "count"
    if key == "effective_tax_rate_pct":
        return f"the effective tax rate for {year} as stated in Note 5, in percent", "percent"
    if key.startswith("segment_"):
        segment = key[len("segment_"):-len("_revenue")].capitalize()
        return f"revenue of the {segment} segment for the year {year} (Note 2)", "amount"
    when = f"at December 31, {year}" if key in BALANCE_KEYS else f"for the year {year}"
    return f"{LABELS[key]} {when}", "amount"


def _unit_request(report: Report, rng: random.Random) -> tuple[str, float, int]:
    """How a task asks for amounts: (phrase, factor from the report's scale, decimals). Mostly
    as stated; sometimes rescaled, so that the stated scale has to be read."""
    cur = report.currency[2]
    stated = (f"in {report.scale} of {cur}, as stated", 1.0, 0)
    if rng.random() < 0.7:
        return stated
    if report.scale == "thousands":
        return rng.choice([(f"in millions of {cur}, rounded to one decimal", 1e-3, 1),
                           (f"in {cur} (whole units, not thousands)", 1e3, 0)])
    return rng.choice([(f"in thousands of {cur}", 1e3, 0), (f"in billions of {cur}, rounded to two decimals", 1e-3, 2)])


def field_spec(report: Report, name: str, request: tuple[str, float, int]) -> dict:
    question, unit = describe(report, name)
    value = report.facts[name]
    if unit == "amount":
        phrase, factor, decimals = request
        return {"name": name, "question": f"{question}, {phrase}", "value": round(value * factor, 9),
                "tolerance": tolerance(decimals) if factor != 1.0 or decimals else 0.0, "unit": "amount",
                "decimals": decimals}
    decimals = 2 if name == "senior_notes_rate_pct" else 1 if unit == "percent" else 0
    return {"name": name, "question": question, "value": value, "tolerance": tolerance(decimals) if decimals else 0.0,
            "unit": unit, "decimals": decimals}


def field_questions(report: Report, rng: random.Random) -> tuple[list[dict], list[dict]]:
    """3-6 stated figures of the report, at least one from a note where it has notes, amounts
    in one requested unit. No checks: every field is read, not derived."""
    shown = {n: v for n, v in report.shown().items() if v != 0}
    from_notes = sorted(n for n in shown if report.where[n] - {"income", "balance", "cash"})
    names = sorted(shown)
    k = rng.randint(3, 6)
    chosen = rng.sample(from_notes, 1) if from_notes else []
    chosen += rng.sample([n for n in names if n not in chosen], k - len(chosen))
    request = _unit_request(report, rng)
    return [field_spec(report, n, request) for n in chosen], []


def _figures(report: Report) -> list[tuple[str, str, list[str], int, str]]:
    """Every derived figure the report's shown facts define: (name, op, inputs, decimals,
    question)."""
    shown, out = report.shown(), []
    pairs = list(zip(report.years, report.years[1:]))
    for y in report.years:
        for key, what in (("gross_profit", "gross margin"), ("operating_income", "operating margin"),
                          ("net_income", "net profit margin")):
            out.append((f"{what.replace(' ', '_')}_pct_{y}", "ratio_pct", [f"{key}_{y}", f"revenue_{y}"], 1,
                        f"{what} for {y} ({key.replace('_', ' ')} / revenue), in percent, rounded to one decimal"))
        out.append((f"current_ratio_{y}", "ratio", [f"total_current_assets_{y}", f"total_current_liabilities_{y}"], 2,
                    f"current ratio at December 31, {y} (total current assets / total current liabilities), "
                    "rounded to two decimals"))
        out.append((f"working_capital_{y}", "difference", [f"total_current_assets_{y}", f"total_current_liabilities_{y}"], 0,
                    f"working capital at December 31, {y} (total current assets - total current liabilities)"))
        out.append((f"free_cash_flow_{y}", "difference", [f"net_cash_operating_{y}", f"capital_expenditures_{y}"], 0,
                    f"free cash flow for {y} (net cash from operating activities - capital expenditures)"))
        out.append((f"debt_{y}", "sum", [f"short_term_debt_{y}", f"long_term_debt_{y}"], 0,
                    f"total borrowings at December 31, {y} (short-term debt + long-term debt)"))
        if shown.get(f"income_before_tax_{y}", 0) > 0:
            out.append((f"tax_rate_pct_{y}", "ratio_pct", [f"income_tax_{y}", f"income_before_tax_{y}"], 1,
                        f"income tax expense as a share of income before taxes for {y}, in percent, rounded to one decimal"))
        for name in report.notes["segments"]:
            seg = f"segment_{name.lower()}_revenue_{y}"
            out.append((f"{name.lower()}_share_pct_{y}", "ratio_pct", [seg, f"revenue_{y}"], 1,
                        f"the {name} segment's share of total revenue in {y}, in percent, rounded to one decimal"))
    for p, y in pairs:
        for key, what in (("revenue", "revenue"), ("net_income", "net income"), ("total_assets", "total assets")):
            if shown.get(f"{key}_{p}", 0) > 0:
                out.append((f"{key}_growth_pct_{y}", "change_pct", [f"{key}_{y}", f"{key}_{p}"], 1,
                            f"year-over-year change in {what} from {p} to {y}, in percent (negative for a "
                            "decline), rounded to one decimal"))
    out.append(("lease_payments_sum", "sum", [f"lease_payment_{report.last + k}" for k in (1, 2, 3)], 0,
                "the sum of the minimum lease payments due in the next three years (Note 6)"))
    return [f for f in out if all(i in shown for i in f[2])]


def figure_questions(report: Report, rng: random.Random) -> tuple[list[dict], list[dict]]:
    """1-2 derived figures with their inputs as fields (in the report's scale, so the arithmetic
    is exact), and a check per figure tying it to the response's own inputs."""
    figures = _figures(report)
    chosen = rng.sample(figures, min(len(figures), rng.choice((1, 1, 2))))
    unit = f"in {report.scale} of {report.currency[2]}"
    stated = (f"{unit}, as stated", 1.0, 0)
    fields, checks, seen = [], [], set()
    for name, op, inputs, decimals, question in chosen:
        for i in inputs:
            if i not in seen:
                seen.add(i)
                fields.append(field_spec(report, i, stated))
        value = apply_op(op, [report.facts[i] for i in inputs])
        amount = op in ("sum", "difference")
        fields.append({"name": name, "question": question + (f", {unit}" if amount else ""),
                       "value": round(value, 9), "tolerance": tolerance(decimals) if decimals else 0.0,
                       "unit": "amount" if amount else "ratio" if op == "ratio" else "percent",
                       "decimals": decimals})
        checks.append({"field": name, "op": op, "args": list(inputs)})
    return fields, checks

