"""`doc_search`: document questions over a report the prompt does not hold, answered with tools.

    prompt:  the questions, and "the report (html, 912 lines, 41,207 characters) is not shown"
    turn 1:  <tool_call>{"name": "search_document", "arguments": {"query": "Total assets"}}</tool_call>
             -> "line 233: Total assets    2,453,860    3,034,772"
    turn 2:  <tool_call>{"name": "read_document", "arguments": {"start": 400, "end": 430}}</tool_call>
    turn 3:  {"total_assets_2024": 3034772, ...}      (a plain response is the submission)

Long reports (20-60 KB) are beyond a small model's context, so reading them whole is no option:
this is retrieval by a search tool, the long-context route of the episodes work. The tools read
the task's own `document` on the trusted side, in-process and bounded (substring search, no
regular expressions: nothing a query holds can make it slow), so nothing runs in the sandbox.
The answer is scored by `document_fields` as for the single-turn domains.
"""

from __future__ import annotations

import random

from flywheel.families.documents.documents import INSTRUCTIONS, DocumentDomain, questions_text
from flywheel.domains.domain import ToolSpec
from flywheel.domains.episodes import EpisodeDomain, Step
from flywheel.domains.registry import register_domain
from flywheel.domains.tools import SUBMIT, ToolCall

SEARCH_DOCUMENT = ToolSpec(
    "search_document", "List the report's lines that contain a text (case-insensitive), with "
    "their line numbers.", {"type": "object", "required": ["query"], "additionalProperties": False,
                            "properties": {"query": {"type": "string", "minLength": 2, "maxLength": 200}}})
READ_DOCUMENT = ToolSpec(
    "read_document", "Show the report's lines start..end (at most 60 lines).",
    {"type": "object", "required": ["start"], "additionalProperties": False,
     "properties": {"start": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
                    "end": {"type": "integer", "minimum": 1, "maximum": 10_000_000}}})
MAX_MATCHES, MAX_LINES, LINE_CHARS = 30, 60, 300


def search(document: str, query: str) -> str:
    """Numbered lines of `document` containing `query` (case-insensitive), the first MAX_MATCHES."""
    needle, hits, total = query.casefold(), [], 0
    for number, line in enumerate(document.splitlines(), start=1):
        if needle in line.casefold():
            total += 1
            if len(hits) < MAX_MATCHES:
                hits.append(f"line {number}: {line.strip()[:LINE_CHARS]}")
    if not hits:
        return f"no line contains {query!r}"
    more = f"\n[{total - len(hits)} more matches; search for something more specific]" if total > len(hits) else ""
    return "\n".join(hits) + more


def read(document: str, start: int, end: int | None) -> str:
    """Lines start..end of `document` (numbered, each cut to LINE_CHARS), at most MAX_LINES."""
    lines = document.splitlines()
    end = min(end or start + MAX_LINES - 1, start + MAX_LINES - 1, len(lines))
    if start > len(lines) or end < start:
        return f"no lines {start}..{end}: the report has {len(lines)} lines"
    return "\n".join(f"{n}: {lines[n - 1][:LINE_CHARS]}" for n in range(start, end + 1))


@register_domain
class DocSearch(DocumentDomain, EpisodeDomain):
    name = "doc_search"
    description = "figures from a long report (20-60 KB) the prompt does not hold: search, read, submit"
    tools = (SEARCH_DOCUMENT, READ_DOCUMENT, SUBMIT)
    plain_tool = SUBMIT.name
    max_turns = 8
    sizes = (("long", 1.0),)
    required_fields = ("task_id", "prompt", "fields", "document")

    def sample_task(self, rng: random.Random) -> dict:
        document, fmt, fields, checks = self.draw(rng, derived=rng.random() < 0.5)
        return self.build(document, fmt, fields, checks, document=document)

    def prompt_for(self, document: str, fields: list[dict], fmt: str) -> str:
        """The questions and how to read the report, which the prompt does not hold."""
        lines = document.count("\n") + 1
        return ("Report these figures from the company's annual report:\n"
                f"{questions_text(fields)}\n\n" + INSTRUCTIONS.format(first=fields[0]["name"])
                + f"\n\nThe report ({fmt}, {lines} lines, {len(document):,} characters) is not shown. "
                "Find the figures with search_document (lines containing a text) and read_document "
                "(lines start..end), then submit the JSON object.")

    def tool_program(self, task: dict, state: dict, call: ToolCall, **report) -> dict | None:
        return None    # the tools read the task's document here, on the trusted side

    def observe(self, task: dict, state: dict, call: ToolCall, result) -> Step:
        args, document = call.arguments, task["document"]
        if call.name == SEARCH_DOCUMENT.name:
            return Step(search(document, args["query"]), state)
        return Step(read(document, args["start"], args.get("end")), state)
