"""A report's blocks (documents_prose.py) written as plain text, Markdown or HTML.

    text = write_document(report_blocks(report, rng), "markdown")

Three formats because a model meets all three: aligned text columns (a filing's text version),
pipe tables, and HTML tables whose cells must be read by structure, not position. The writers
only lay out; every word and number comes from the blocks, so the formats state the same facts.
"""

from __future__ import annotations

import html
import textwrap

from flywheel.families.documents.documents_prose import Grid

FORMATS = ("text", "markdown", "html")


def _text_table(grid: Grid) -> list[str]:
    label_width = max([len(label) for label, _, _ in grid.rows] + [12]) + 2
    widths = [max([len(h)] + [len(cells[i]) for _, cells, _ in grid.rows]) + 4 for i, h in enumerate(grid.header)]
    line = lambda label, cells: (label.ljust(label_width)  # noqa: E731
                                 + "".join(c.rjust(w) for c, w in zip(cells, widths))).rstrip()
    out = [grid.caption, line("", grid.header)]
    rule = "-" * (label_width + sum(widths))
    for label, cells, total in grid.rows:
        if total:
            out.append(rule)
        out.append(line(label, cells))
    return out + [""]


def _text(blocks: list) -> str:
    out = []
    for kind, *body in blocks:
        if kind == "table":
            out += _text_table(body[0])
        elif kind == "p":
            out += [textwrap.fill(body[0], width=100, break_on_hyphens=False, break_long_words=False), ""]
        else:
            title = body[0].upper() if kind == "h1" else body[0]
            out += [title, ("=" if kind != "h3" else "-") * len(title), ""]
    return "\n".join(out).rstrip() + "\n"


def _markdown(blocks: list) -> str:
    out = []
    for kind, *body in blocks:
        if kind == "table":
            grid = body[0]
            out += [f"*{grid.caption}*", "", "| | " + " | ".join(grid.header) + " |",
                    "|---|" + "---:|" * len(grid.header)]
            for label, cells, total in grid.rows:
                cells = [f"**{c}**" for c in cells] if total else list(cells)
                out.append(f"| {'**' + label + '**' if total else label} | " + " | ".join(cells) + " |")
            out.append("")
        elif kind == "p":
            out += [body[0], ""]
        else:
            out += [{"h1": "#", "h2": "##", "h3": "###"}[kind] + " " + body[0], ""]
    return "\n".join(out).rstrip() + "\n"


def _html(blocks: list) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\"><title>Annual report</title></head><body>"]
    for kind, *body in blocks:
        if kind == "table":
            grid = body[0]
            out.append(f"<table>\n<caption>{e(grid.caption)}</caption>")
            out.append("<thead><tr><th></th>" + "".join(f"<th>{e(h)}</th>" for h in grid.header) + "</tr></thead><tbody>")
            for label, cells, total in grid.rows:
                style = ' class="total"' if total else ""
                out.append(f"<tr{style}><td>{e(label)}</td>" + "".join(f"<td align=\"right\">{e(c)}</td>" for c in cells)
                           + "</tr>")
            out.append("</tbody></table>")
        elif kind == "p":
            out.append(f"<p>{e(body[0])}</p>")
        else:
            out.append(f"<{kind}>{e(body[0])}</{kind}>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_document(blocks: list, fmt: str) -> str:
    """The blocks as one document in `fmt` (text, markdown or html)."""
    writers = {"text": _text, "markdown": _markdown, "html": _html}
    if fmt not in writers:
        raise ValueError(f"unknown document format {fmt!r}; expected one of {FORMATS}")
    return writers[fmt](blocks)
