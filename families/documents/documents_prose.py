"""What a generated report says, as a list of blocks: headings, paragraphs and tables.

    blocks = report_blocks(report, rng)   # [("h1", text), ("p", text), ("table", Grid), ...]

Blocks are format-free; documents_text.py writes them as plain text, Markdown or HTML and
documents_pdf.py as a PDF. Every number a block states is one of the report's facts or a figure
derived from them here (a growth rate the narrative quotes), so the document never disagrees with
itself. Cross-references ("see Note 4") point only at notes the report includes. `long` reports
get filler sections (risk factors, properties, governance...) until they reach a drawn length of
20-60 KB, beyond a small model's context, with the figures spread between them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from flywheel.families.documents.documents_gen import NOTES, Report, Table

LONG_CHARS = (20_000, 60_000)


@dataclass(frozen=True)
class Grid:
    """A table as rendered: caption, column headers, rows of (label, cells, is_total)."""
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...], bool], ...]


def amount(value: int) -> str:
    """1234567 -> "1,234,567"; negatives in parentheses, as statements print them."""
    return f"({-value:,})" if value < 0 else f"{value:,}"


def unit_phrase(report: Report) -> str:
    return f"in {report.scale} of {report.currency[2]}"


def money(report: Report, value: int) -> str:
    """1234 -> "$1,234 thousand": a figure in prose, with its scale."""
    sign = "-" if value < 0 else ""
    return f"{sign}{report.currency[1]}{abs(value):,} {report.scale[:-1]}"


def note_ref(report: Report, part: str) -> str:
    return f" (Note {NOTES[part]})" if part in report.parts else ""


def _grid(report: Report, table: Table, caption: str) -> Grid:
    refs = {n: part for part, n in NOTES.items()}
    rows = tuple((row.label + (note_ref(report, refs[row.note]) if row.note else ""),
                  tuple(amount(v) for v in row.values), row.total) for row in table.rows)
    return Grid(caption, tuple(str(y) for y in report.years), rows)


def _statements(report: Report) -> list:
    blocks = []
    for part, table in zip(("income", "balance", "cash"), report.statements):
        if part in report.parts:
            when = "December 31" if table.kind == "balance" else "years ended December 31"
            blocks += [("h2", table.title),
                       ("table", _grid(report, table, f"({unit_phrase(report)}; {when})"))]
    return blocks


def _per_year(report: Report, keys: list[tuple[str, str]], total: str | None = None) -> Grid:
    f = report.facts
    rows = [(label, tuple(amount(f[f"{k}_{y}"]) for y in report.years), k == total) for k, label in keys]
    return Grid(f"({unit_phrase(report)})", tuple(str(y) for y in report.years), tuple(rows))


def _notes(report: Report) -> list:
    f, years = report.facts, report.years
    blocks = [("h2", "Notes to the consolidated financial statements"),
              ("h3", "Note 1. Basis of presentation"),
              ("p", f"{report.company} prepares its consolidated financial statements on a fiscal year "
                    f"ending December 31. Amounts are stated {unit_phrase(report)}, except headcount, "
                    "interest rates and percentages, which are stated as they are.")]
    if "segments" in report.parts:
        names = report.notes["segments"]
        blocks += [("h3", "Note 2. Segment information"),
                   ("p", f"The company reports {len(names)} operating segments: {', '.join(names)}. "
                         "Segment revenue is revenue from external customers."),
                   ("table", _grid(report, report.statements[3], f"(revenue, {unit_phrase(report)})"))]
    if "ppe" in report.parts:
        blocks += [("h3", "Note 3. Property, plant and equipment"),
                   ("table", _per_year(report, [("ppe_gross", "Property, plant and equipment, at cost"),
                                                ("accumulated_depreciation", "Less: accumulated depreciation"),
                                                ("ppe_net", "Property, plant and equipment, net")], "ppe_net")),
                   ("p", " ".join(f"Depreciation expense was {money(report, f[f'depreciation_{y}'])} and capital "
                                  f"expenditures were {money(report, f[f'capital_expenditures_{y}'])} in {y}."
                                  for y in years))]
    if "debt" in report.parts:
        blocks += [("h3", "Note 4. Debt"),
                   ("p", f"The senior notes bear interest at a fixed rate of {f['senior_notes_rate_pct']:.2f}% "
                         "per year; the term loan bears a floating rate. Total debt comprises short-term "
                         "and long-term debt as presented in the balance sheets."),
                   ("table", _per_year(report, [("senior_notes", "Senior notes"), ("term_loan", "Term loan"),
                                                ("total_debt", "Total debt")], "total_debt")),
                   ("p", f"Contractual maturities of debt outstanding at December 31, {report.last}:"),
                   ("table", Grid(f"({unit_phrase(report)})", ("Amount",), tuple(
                       (label, (amount(a),), False) for label, a in report.notes["maturities"])
                       + (("Total", (amount(f[f"total_debt_{report.last}"]),), True),)))]
    if "tax" in report.parts:
        rates = [f"{f[f'effective_tax_rate_pct_{y}']:.1f}% in {y}" for y in years
                 if f"effective_tax_rate_pct_{y}" in f]
        text = ("The effective tax rate was " + ", ".join(rates) + ", against a statutory rate of "
                f"{report.notes['statutory_rate_pct']:.1f}%." if rates else
                "The company recorded no income tax expense on its pre-tax losses.")
        blocks += [("h3", "Note 5. Income taxes"), ("p", text),
                   ("table", _per_year(report, [("income_before_tax", "Income before income taxes"),
                                                ("income_tax", "Income tax expense")]))]
    if "leases" in report.parts:
        blocks += [("h3", "Note 6. Leases"),
                   ("p", "Future minimum payments under non-cancellable operating leases:"),
                   ("table", Grid(f"({unit_phrase(report)})", ("Amount",), tuple(
                       (label, (amount(a),), False) for label, a in report.notes["leases"])
                       + (("Total", (amount(f["lease_commitments_total"]),), True),)))]
    if "people" in report.parts:
        blocks += [("h3", "Note 7. Employees"),
                   ("p", " ".join(f"At December 31, {y}, the company employed {f[f'headcount_{y}']:,} people."
                                  for y in years))]
    return blocks


def _discussion(report: Report) -> list:
    """Management's discussion: restates figures (and growth rates derived from them) in prose,
    with cross-references to the notes."""
    f, (prev, last) = report.facts, report.years[-2:]
    rev, rev0 = f[f"revenue_{last}"], f[f"revenue_{prev}"]
    change = 100 * (rev - rev0) / rev0
    margin = 100 * f[f"gross_profit_{last}"] / rev
    text = [f"Revenue {'increased' if change >= 0 else 'decreased'} {abs(change):.1f}% to {money(report, rev)} "
            f"in {last}, compared with {money(report, rev0)} in {prev}. Gross "
            f"margin was {margin:.1f}% of revenue in {last}."]
    if "segments" in report.parts:
        name = report.notes["segments"][0]
        text.append(f"The {name} segment contributed {money(report, f['segment_' + name.lower() + '_revenue_' + str(last)])} "
                    f"of revenue in {last}{note_ref(report, 'segments')}.")
    text.append(f"Net income was {money(report, f[f'net_income_{last}'])}, against "
                f"{money(report, f[f'net_income_{prev}'])} a year earlier.")
    liquidity = (f"At December 31, {last}, cash and cash equivalents were {money(report, f[f'cash_{last}'])}.")
    if "debt" in report.parts:
        liquidity += (f" Total debt was {money(report, f[f'total_debt_{last}'])}; its maturities "
                      f"are set out in Note 4.")
    if "ppe" in report.parts:
        liquidity += " Capital expenditures and depreciation are discussed in Note 3."
    return [("h2", "Management's discussion and analysis"), ("p", " ".join(text)), ("p", liquidity)]


TOPICS = ["supply chain disruption", "currency movements", "cybersecurity incidents", "regulatory change",
          "customer concentration", "interest rate volatility", "labour shortages", "climate-related risks",
          "litigation", "product recalls", "commodity prices", "pension obligations", "data privacy rules",
          "competition from new entrants", "the loss of key personnel", "tax law changes"]
VERBS = ["could adversely affect", "may reduce", "might delay", "could increase the cost of", "may disrupt"]
OBJECTS = ["our results of operations", "demand for our products", "our margins", "our access to capital",
           "the timing of new programs", "our relationships with suppliers", "our reported earnings"]
CLAUSES = ["despite the controls we maintain", "in the markets where we operate", "over the coming years",
           "if mitigation measures prove insufficient", "as has happened to others in our industry",
           "even where insurance coverage is available", "particularly in periods of weak demand"]
FILLER_SECTIONS = ["Risk factors", "Properties", "Legal proceedings", "Corporate governance",
                   "Sustainability", "Information technology and security", "Human capital"]


def _sentence(rng: random.Random) -> str:
    return (f"{rng.choice(TOPICS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
            f"{rng.choice(CLAUSES)}.")


def _filler(rng: random.Random, chars: int) -> list:
    """Filler sections of prose, about `chars` characters in all, holding no figures."""
    blocks, written, sections = [], 0, list(FILLER_SECTIONS)
    rng.shuffle(sections)
    per_section = max(2_000, chars // len(sections))
    for title in sections:
        if written >= chars:
            break
        blocks.append(("h2", title))
        here = 0
        while here < per_section and written < chars:
            text = " ".join(_sentence(rng) for _ in range(rng.randint(3, 7)))
            blocks.append(("p", text))
            here += len(text)
            written += len(text)
    return blocks


def report_blocks(report: Report, rng: random.Random) -> list:
    """The document's blocks in reading order. Short reports: title and the figures; medium: a
    discussion too; long: filler before and after the figures, up to a drawn length."""
    blocks = [("h1", f"{report.company}: Annual Report {report.last}"),
              ("p", f"Fiscal year ended December 31, {report.last}. All amounts {unit_phrase(report)} "
                    "unless stated otherwise.")]
    figures = _statements(report) + _notes(report)
    if report.size == "short":
        return blocks + figures
    discussion = _discussion(report)
    if report.size == "medium":
        return blocks + discussion + figures
    target = rng.randint(*LONG_CHARS)
    filler = _filler(rng, max(0, target - 9_000))
    cut = next((i for i in range(len(filler) // 2, len(filler)) if filler[i][0] == "h2"), len(filler))
    return blocks + filler[:cut] + discussion + figures + filler[cut:]
