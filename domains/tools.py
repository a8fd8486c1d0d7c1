"""Tool calls of multi-turn episodes: the standard tools' contracts and the parser of an action.

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

import json
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from flywheel.domains.registry import ToolSpec

MAX_ACTION_CHARS = 64_000  # longer actions are refused before any parsing (bounded trusted work)
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)

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
RUN_SHELL = ToolSpec("run_shell", "Run a bash command in the task's working directory; files you "
                     "write stay for the next command.", {
    "type": "object", "required": ["command"], "additionalProperties": False,
    "properties": {"command": {"type": "string", "maxLength": 4000}}})
WRITE_FILE = ToolSpec("write_file", "Create or overwrite a file in the working directory.", {
    "type": "object", "required": ["path", "content"], "additionalProperties": False,
    "properties": {"path": {"type": "string",  # relative, no `..` part
                            "pattern": r"^(?!.*(^|/)\.\.(/|$))[A-Za-z0-9_.-][A-Za-z0-9_./-]{0,99}$"},
                   "content": {"type": "string", "maxLength": 20_000}}})


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
    """The call that `text` makes among `tools`; raises ToolCallError saying what is wrong.

    The first `<tool_call>` block counts (one call per turn); text without one calls `plain_tool`.
    """
    offered = {t.name: t for t in tools}
    if len(text) > MAX_ACTION_CHARS:
        raise ToolCallError(f"the action is {len(text)} characters; at most {MAX_ACTION_CHARS}")
    match = _CALL.search(text)
    if match is None:
        spec = offered[plain_tool]
        call = ToolCall(plain_tool, {text_argument(spec): text})
    else:
        try:
            body = json.loads(match.group(1))
        except ValueError as e:
            raise ToolCallError(f"the tool call is not JSON ({e.msg} at character {e.pos})") from None
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise ToolCallError('a tool call is {"name": TOOL, "arguments": {...}}')
        arguments = body.get("arguments", body.get("parameters", {}))
        if isinstance(arguments, str):  # some templates emit the arguments JSON-encoded
            try:
                arguments = json.loads(arguments)
            except ValueError:
                raise ToolCallError("the tool call's arguments are not a JSON object") from None
        call = ToolCall(body["name"], arguments)
    if call.name not in offered:
        raise ToolCallError(f"unknown tool {call.name[:60]!r}; the tools are "
                            f"{', '.join(sorted(offered))}")
    problem = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(offered[call.name].parameters).iter_errors(call.arguments))
    if problem is not None:
        where = "/".join(map(str, problem.absolute_path)) or "arguments"
        raise ToolCallError(f"{call.name}: {where}: {problem.message[:200]}")
    return call


def render_call(call: ToolCall) -> str:
    """`call` in the chat-template form (what `replay` prints and tests feed back)."""
    return "<tool_call>" + json.dumps({"name": call.name, "arguments": call.arguments}) + "</tool_call>"
