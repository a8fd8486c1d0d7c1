"""`doc_pdf`: document fields read from a PDF's text layer (the `documents` extra: fpdf2, pypdf).

    pdf = write_pdf(report_blocks(report, rng))     # bytes, the same for the same blocks
    text = pdf_text(pdf)                            # what a PDF reader extracts from them

A report is rendered to PDF with fpdf2 (core fonts, fixed creation date: deterministic bytes) and
read back with pypdf; the prompt holds the extracted text, as a pipeline over real PDFs would
give a text model: table columns flattened into runs of numbers, headings no longer marked up.
The truth is still the report's facts, so the task tests reading through the extraction. Both
libraries are pure Python and work offline; without them this domain's tasks cannot be drawn
(a clear error naming the extra) and everything else works as before.
"""

from __future__ import annotations

import importlib
import io
import random
from datetime import datetime, timezone

from flywheel.families.documents.documents import DocumentDomain
from flywheel.families.documents.documents_gen import make_report
from flywheel.families.documents.documents_prose import report_blocks
from flywheel.families.documents.documents_questions import field_questions, figure_questions
from flywheel.domains.registry import register_domain

EXTRA = "pip install 'flywheel[documents]' (fpdf2 and pypdf)"
ASCII = {"€": "EUR ", "£": "GBP ", "$": "USD ", "'": "'", "\u2019": "'", "\u2013": "-", "\u2014": "-"}
LABEL_MM, CELL_MM = 95.0, 30.0


def available() -> bool:
    """Whether the `documents` extra is installed and imports."""
    try:
        for name in ("fpdf", "pypdf"):
            importlib.import_module(name)
    except ImportError:
        return False
    return True


def _latin(text: str) -> str:
    """Core PDF fonts hold Latin-1 only: currency signs become codes."""
    for k, v in ASCII.items():
        text = text.replace(k, v)
    return text.encode("latin-1", "replace").decode("latin-1")


def write_pdf(blocks: list) -> bytes:
    """The blocks as PDF bytes: headings, wrapped paragraphs, tables with right-aligned figures."""
    try:
        from fpdf import FPDF
    except ImportError as e:
        raise ModuleNotFoundError(f"PDF documents need fpdf2: {EXTRA}") from e
    pdf = FPDF(format="A4")
    pdf.set_creation_date(datetime(2000, 1, 1, tzinfo=timezone.utc))
    pdf.set_auto_page_break(True, margin=15)
    pdf.add_page()
    sizes = {"h1": 15, "h2": 12, "h3": 10.5}
    for kind, *body in blocks:
        if kind in sizes:
            pdf.set_font("helvetica", "B", sizes[kind])
            pdf.multi_cell(0, 7, _latin(body[0]), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif kind == "p":
            pdf.set_font("helvetica", "", 9)
            pdf.multi_cell(0, 4.5, _latin(body[0]), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        else:
            grid = body[0]
            pdf.set_font("helvetica", "I", 8.5)
            pdf.cell(0, 5, _latin(grid.caption), new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("helvetica", "B", 8.5)
            pdf.cell(LABEL_MM, 5, "")
            for h in grid.header:
                pdf.cell(CELL_MM, 5, h, align="R")
            pdf.ln(5)
            for label, cells, total in grid.rows:
                pdf.set_font("helvetica", "B" if total else "", 8.5)
                pdf.cell(LABEL_MM, 5, _latin(label)[:70])
                for c in cells:
                    pdf.cell(CELL_MM, 5, c, align="R")
                pdf.ln(5)
            pdf.ln(2)
    return bytes(pdf.output())


def pdf_text(data: bytes) -> str:
    """The text layer of PDF `data`, page after page, as pypdf extracts it."""
    try:
        from pypdf import PdfReader
    except ImportError as e:
        raise ModuleNotFoundError(f"reading PDF documents needs pypdf: {EXTRA}") from e
    reader = PdfReader(io.BytesIO(data))
    return "\n".join(page.extract_text() or "" for page in reader.pages).strip() + "\n"


@register_domain
class DocPdf(DocumentDomain):
    name = "doc_pdf"
    description = "figures read from a report's PDF text layer (needs the `documents` extra)"
    sizes = (("short", 0.5), ("medium", 0.5))

    def draw(self, rng: random.Random, derived: bool | None = None) -> tuple[str, str, list[dict], list[dict]]:
        if not available():
            raise ModuleNotFoundError(f"domain {self.name} needs fpdf2 and pypdf: {EXTRA}")
        size = rng.choices([s for s, _ in self.sizes], [w for _, w in self.sizes])[0]
        report = make_report(rng, size)
        text = pdf_text(write_pdf(report_blocks(report, rng)))
        fields, checks = (figure_questions if derived else field_questions)(report, rng)
        return text, "text extracted from a PDF", fields, checks
