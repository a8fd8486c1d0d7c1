"""Tool calls of multi-turn episodes: the standard tools' contracts and the parser of an action.

Each tool name is defined here once (its arguments' JSON Schema); a family offering `run_shell`
or `write_file` imports it (and may describe it in its own words: `described`).

A domain declares the tools it offers as `ToolSpec`s (a name, a description, JSON Schema for the
arguments). A policy calls one per turn, in either of two forms:

- the chat-template form Hugging Face tool-calling models are trained on (Hermes, Qwen, SmolLM):
  `<tool_call>{"name": "run_tests", "arguments": {"code": "..."}}</tool_call>`;
- the textual protocol of the built-in tiny policy: a response without a tool call is a call to
  the domain's `plain_tool` with the whole text as that tool's one text argument.

A call that does not parse, names no offered tool, or does not match its schema is refused with a
message for the model (the next observation): a model-side mistake, never a crash.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from flywheel.domains.domain import ToolSpec
from flywheel.domains.untrusted_text import PARSER_FAILURES, Unreadable, load_json

MAX_ACTION_CHARS = 64_000  # longer actions are refused before any parsing (bounded trusted work)
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"

CODE = {"type": "string", "maxLength": 20_000}
RUN_TESTS = ToolSpec("run_tests", "Run the task's visible tests against your code; shows which fail.", {
    "type": "object", "required": ["code"], "additionalProperties": False,
    "properties": {"code": CODE}})
SUBMIT = ToolSpec("submit", "Submit your final answer; the episode ends and it is scored.", {
    "type": "object", "required": ["answer"], "additionalProperties": False,
    "properties": {"answer": CODE}})
RUN_CODE = ToolSpec("run_code", "Run a Python program; shows its output and errors.", {
    "type": "object", "required": ["code"], "additionalProperties": False,
    "properties": {"code": CODE}})
# a path relative to the working directory: not absolute, no `..` part, no NUL, line break or
# other control character (a real repository's names may hold spaces, `+` or `@`: a family that
# writes it into a shell line quotes it), at most 300 characters
PATH = {"type": "string", "maxLength": 300,
        "pattern": r"^(?!/)(?!.*(^|/)\.\.(/|$))[^\x00-\x1f\x7f]+$"}
RUN_SHELL = ToolSpec("run_shell", "Run a bash command in the working directory; shows its output "
                     "and exit status. Files it writes stay for the next command.", {
    "type": "object", "required": ["command"], "additionalProperties": False,
    "properties": {"command": {"type": "string", "maxLength": 8000}}})
WRITE_FILE = ToolSpec("write_file", "Create or overwrite a file in the working directory.", {
    "type": "object", "required": ["path", "content"], "additionalProperties": False,
    "properties": {"path": PATH, "content": {"type": "string", "maxLength": 100_000}}})


@dataclass(frozen=True)
class ToolCall:
    """One parsed, schema-checked call: the tool's name and its arguments."""
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


class ToolCallError(ValueError):
    """The action is not a valid call; the message is what the model reads next."""


def text_argument(spec: ToolSpec) -> str:
    """The one required string argument of `spec`: where a plain-text action goes."""
    required = spec.parameters.get("required") or []
    strings = [n for n in required if spec.parameters["properties"][n].get("type") == "string"]
    if len(strings) != 1:
        raise ValueError(f"tool {spec.name} has no single text argument for plain actions")
    return strings[0]


def parse_action(text: str, tools: tuple[ToolSpec, ...], plain_tool: str) -> ToolCall:
    """The call that `text` makes among `tools`; raises ToolCallError saying what is wrong, and
    nothing else, whatever the text holds (linear time: no backtracking pattern, JSON nesting
    and numbers bounded by untrusted_text.load_json).

    The first `<tool_call>` block counts (one call per turn); text without one calls `plain_tool`.
    """
    offered = {t.name: t for t in tools}
    if len(text) > MAX_ACTION_CHARS:
        raise ToolCallError(f"the action is {len(text)} characters; at most {MAX_ACTION_CHARS}")
    call = _call_of(text, offered[plain_tool])
    if call.name not in offered:
        raise ToolCallError(f"unknown tool {call.name[:60]!r}; the tools are "
                            f"{', '.join(sorted(offered))}")
    try:
        problem = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(offered[call.name].parameters).iter_errors(call.arguments))
    except PARSER_FAILURES as e:  # a pathological value the validator cannot walk
        raise ToolCallError(f"{call.name}: the arguments cannot be checked ({type(e).__name__})") from None
    if problem is not None:
        where = "/".join(map(str, problem.absolute_path))[:100] or "arguments"
        raise ToolCallError(f"{call.name}: {where}: {problem.message[:200]}")
    return call


def _call_of(text: str, plain: ToolSpec) -> ToolCall:
    """The call `text` spells: its first `<tool_call>` block (to `</tool_call>` or the end), else
    `plain` with the whole text as its text argument; not yet checked against any schema."""
    start = text.find(CALL_OPEN)
    if start < 0:
        return ToolCall(plain.name, {text_argument(plain): text})
    end = text.find(CALL_CLOSE, start + len(CALL_OPEN))
    block = text[start + len(CALL_OPEN):end if end >= 0 else len(text)].strip()
    try:
        body = load_json(block)
    except Unreadable as e:
        raise ToolCallError(f"the tool call is {e}") from None
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise ToolCallError('a tool call is {"name": TOOL, "arguments": {...}}')
    arguments = body.get("arguments", body.get("parameters", {}))
    if isinstance(arguments, str):  # some templates emit the arguments JSON-encoded
        try:
            arguments = load_json(arguments)
        except Unreadable:
            raise ToolCallError("the tool call's arguments are not a JSON object") from None
    if not isinstance(arguments, dict):
        raise ToolCallError("the tool call's arguments are not a JSON object")
    return ToolCall(body["name"], arguments)


def render_call(call: ToolCall) -> str:
    """`call` in the chat-template form (what `replay` prints and tests feed back)."""
    return "<tool_call>" + json.dumps({"name": call.name, "arguments": call.arguments}) + "</tool_call>"


def described(spec: ToolSpec, description: str) -> ToolSpec:
    """`spec` with a family's own description; its name and arguments (the contract) unchanged."""
    return dataclasses.replace(spec, description=description)
