"""Document analysis domains: read a long financial report, answer with its figures as JSON.

- `doc_fields`: 3-6 named figures as stated (a statement line, a segment, a note's rate or
  headcount), amounts sometimes asked in another scale than the report's.
- `doc_figures`: derived figures (margins, growth, ratios, totals) and the inputs they come
  from; the verifier checks each figure against its own reported inputs as well as the truth.
- `doc_search`: either kind of question over a long report (20-60 KB) that the prompt does not
  hold: the policy searches and reads it with tools, then submits (an episode; run with
  --max-turns N). A plain response is the submission, so it also works single-turn.
- `documents`: your own documents (--tasks FILE), one row per document (see `normalize_task`).

Reports are generated (documents_gen.py: consistent by construction), written as plain text,
Markdown or HTML (documents_text.py), 1-60 KB. Scored by `document_fields`.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

from flywheel.families.documents.documents_gen import make_report
from flywheel.families.documents.documents_prose import report_blocks
from flywheel.families.documents.documents_questions import OPS, field_questions, figure_questions
from flywheel.families.documents.documents_text import FORMATS, write_document
from flywheel.domains.domain import Domain, short_key
from flywheel.domains.json_answer import parse_json
from flywheel.domains.registry import register_domain

INSTRUCTIONS = (
    "Answer with one JSON object that maps each name to a JSON number: no units, no thousands "
    "separators, a minus sign for negative amounts (statements show them in parentheses), percent "
    "figures as percents (12.5 for 12.5%), e.g. {{\"{first}\": 123.4, ...}}. Give each name once.")
MAX_DOCUMENT_CHARS = 2_000_000   # a user's document beyond this is refused, not truncated
MAX_FIELDS = 50


def questions_text(fields: list[dict]) -> str:
    return "\n".join(f"- {f['name']}: {f['question']}" for f in fields)


def document_prompt(document: str, fields: list[dict], fmt: str) -> str:
    return (f"Read the annual report below and report these figures:\n{questions_text(fields)}\n\n"
            + INSTRUCTIONS.format(first=fields[0]["name"])
            + f"\n\nThe report ({fmt}):\n\n{document}")


def expected_answer(fields: list[dict]) -> dict[str, float | int]:
    """The reference answer: each field at its stated decimals (integers as integers)."""
    out = {}
    for f in fields:
        decimals = int(f.get("decimals") or 0)
        value = round(float(f["value"]), decimals)
        out[f["name"]] = int(value) if decimals == 0 and value.is_integer() else value
    return out


ANSWER_CHARS = 32_000  # = document_fields.MAX_RESPONSE_CHARS: no longer reply is read


def _on_grid(value: Any, spec: dict) -> str:
    """A figure rounded to twice its tolerance (its exact value when it has none), or "?"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "?"
    try:
        x = float(value)
    except OverflowError:
        return "?"
    if not math.isfinite(x) or abs(x) > 1e18:
        return "?"
    step = 2 * float(spec.get("tolerance") or 0)
    if step <= 0:
        return f"{x:.10g}"
    decimals = max(0, 1 - math.floor(math.log10(step)))  # the grid's digits, no float noise
    return f"{round(x / step) * step:.{decimals}f}"


class DocumentDomain(Domain):
    """Tasks: prompt, document, fields, checks (the `document_fields` verifier's contract)."""

    verifier = "document_fields"
    max_new_tokens = 256
    required_fields = ("task_id", "prompt", "fields")
    sizes: tuple[tuple[str, float], ...] = (("short", 0.35), ("medium", 0.4), ("long", 0.25))
    derived = False

    def answer_key(self, task: dict[str, Any], response: str) -> str | None:
        """The figures as the verifier reads them (the response's JSON object, json_answer.py),
        each on its tolerance's grid, in the task's field order: answers the verifier cannot tell
        apart vote together. None for no JSON object or no figure; too long a response (the
        verifier reads none past ANSWER_CHARS) has none either."""
        if len(response) > ANSWER_CHARS:
            return None
        answer, _ = parse_json(response)
        if not isinstance(answer, dict):
            return None
        parts = [f"{spec['name']}={_on_grid(answer.get(spec['name']), spec)}" for spec in task["fields"]]
        return None if all(p.endswith("=?") for p in parts) else short_key(";".join(parts))

    def draw(self, rng: random.Random, derived: bool | None = None) -> tuple[str, str, list[dict], list[dict]]:
        """(document, format, fields, checks) of one generated task; `derived`: figures
        (doc_figures' questions) rather than fields, by default the domain's own kind."""
        size = rng.choices([s for s, _ in self.sizes], [w for _, w in self.sizes])[0]
        report = make_report(rng, size)
        fmt = rng.choice(FORMATS)
        document = write_document(report_blocks(report, rng), fmt)
        fields, checks = (figure_questions if (self.derived if derived is None else derived)
                          else field_questions)(report, rng)
        return document, fmt, fields, checks

    def sample_task(self, rng: random.Random) -> dict:
        text, fmt, fields, checks = self.draw(rng)
        return self.build(text, fmt, fields, checks)

    def build(self, text: str, fmt: str, fields: list[dict], checks: list[dict], **more) -> dict:
        return {"prompt": self.prompt_for(text, fields, fmt), "fields": fields, "checks": checks,
                "format": fmt, "document_chars": len(text),
                "answer": json.dumps(expected_answer(fields)), **more}

    def prompt_for(self, document: str, fields: list[dict], fmt: str) -> str:
        """The prompt of a task on `document` (here: the document inline)."""
        return document_prompt(document, fields, fmt)

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return "```json\n" + json.dumps(expected_answer(task["fields"])) + "\n```"

    def normalize_task(self, row: dict[str, Any]) -> dict[str, Any]:
        """A user's row: {"document": text, "fields": [{"name", "question", "value",
        "tolerance"?, "decimals"?, "unit"?, "required"?}], "checks"?: [{"field", "op", "args",
        "tolerance"?}], "format"?: text|markdown|html}; the prompt is built unless given."""
        task = dict(row)
        if self.validate_rows(task):     # leave it as it is: validate_task says what is wrong
            return task
        task.setdefault("checks", [])
        if not task.get("prompt"):
            task.update(prompt=self.prompt_for(task["document"], task["fields"], task.get("format") or "text"))
        task.setdefault("answer", json.dumps(expected_answer(task["fields"])))
        return task

    def validate_task(self, task: dict[str, Any]) -> list[str]:
        base = [p for p in super().validate_task(task)     # validate_rows says it for these two
                if p not in ("field `prompt` missing", "field `document` missing")]
        return base + self.validate_rows(task)

    def validate_rows(self, task: dict[str, Any]) -> list[str]:
        """Problems of the document, fields and checks, each naming the field."""
        problems = []
        document, needed = task.get("document"), "document" in self.required_fields
        if (needed or not task.get("prompt")) and not (isinstance(document, str) and document.strip()):
            problems.append("field `document` must be a non-empty string" + ("" if needed else " (or give a `prompt`)"))
        elif isinstance(document, str) and len(document) > MAX_DOCUMENT_CHARS:
            problems.append(f"field `document` is {len(document)} characters; at most {MAX_DOCUMENT_CHARS}")
        fields = task.get("fields")
        if not isinstance(fields, list) or not fields:
            return problems + ["field `fields` must be a non-empty list of {name, question, value}"]
        if len(fields) > MAX_FIELDS:
            problems.append(f"field `fields` has {len(fields)} entries; at most {MAX_FIELDS}")
        names = set()
        for i, f in enumerate(fields):
            where = f"field `fields[{i}]"
            if not isinstance(f, dict):
                problems.append(f"{where}` must be an object")
                continue
            name = f.get("name")
            if not isinstance(name, str) or not name.strip() or len(name) > 100:
                problems.append(f"{where}.name` must be a non-empty string of at most 100 characters")
            elif name in names:
                problems.append(f"{where}.name` repeats {name!r}")
            names.add(name)
            if not isinstance(f.get("question"), str) or not f["question"].strip():
                problems.append(f"{where}.question` must be a non-empty string")
            problems += [f"{where}.{k}` must be a number, got {f.get(k)!r}"
                         for k in ("value", "tolerance", "decimals") if (k == "value" or k in f)
                         and not _finite_number(f.get(k))]
            if _finite_number(f.get("tolerance")) and f["tolerance"] < 0:
                problems.append(f"{where}.tolerance` must be >= 0")
            if "required" in f and not isinstance(f["required"], bool):
                problems.append(f"{where}.required` must be true or false")
        checks = task.get("checks") or []
        if not isinstance(checks, list):
            return problems + ["field `checks` must be a list"]
        for i, c in enumerate(checks):
            where = f"field `checks[{i}]"
            if not isinstance(c, dict):
                problems.append(f"{where}` must be an object")
                continue
            if c.get("op") not in OPS:
                problems.append(f"{where}.op` must be one of {', '.join(OPS)}, got {c.get('op')!r}")
            if c.get("field") not in names:
                problems.append(f"{where}.field` names no field: {c.get('field')!r}")
            if "tolerance" in c and not (_finite_number(c["tolerance"]) and c["tolerance"] >= 0):
                problems.append(f"{where}.tolerance` must be a number >= 0, got {c['tolerance']!r}")
            args = c.get("args")
            if not isinstance(args, list) or not args or any(a not in names for a in args):
                problems.append(f"{where}.args` must list field names, got {args!r}")
        return problems


def _finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) < float("inf") and x == x


@register_domain
class DocFields(DocumentDomain):
    name = "doc_fields"
    description = "figures read from a generated annual report (text, Markdown or HTML, 1-60 KB) as JSON"


@register_domain
class DocFigures(DocumentDomain):
    name = "doc_figures"
    description = "derived figures (margins, growth, ratios, totals) from a generated annual report, with their inputs"
    derived = True


@register_domain
class UserDocuments(DocumentDomain):
    name = "documents"
    description = "your own documents (--tasks FILE: document; fields, each a name, question and value; checks)"

    def task_count(self) -> int | None:
        return 0
