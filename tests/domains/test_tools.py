"""Tool calls: the chat-template form, the tiny policy's plain-text form, and every way a call is
refused with a message for the model instead of a crash."""

import json

import pytest

from flywheel.domains.tools import (MAX_ACTION_CHARS, RUN_SHELL, RUN_TESTS, SUBMIT, WRITE_FILE,
                                    ToolCall, ToolCallError, parse_action, render_call)

TOOLS = (RUN_TESTS, SUBMIT, RUN_SHELL, WRITE_FILE)


def test_plain_text_calls_the_plain_tool_with_the_whole_text():
    assert parse_action("x+3", TOOLS, "run_tests") == ToolCall("run_tests", {"code": "x+3"})
    assert parse_action("ls -la", TOOLS, "run_shell") == ToolCall("run_shell", {"command": "ls -la"})


def test_chat_template_call_round_trips():
    call = ToolCall("write_file", {"path": "a/b.txt", "content": "hi"})
    text = "Let me write it.\n" + render_call(call) + "\ntrailing words"
    assert parse_action(text, TOOLS, "run_tests") == call
    # arguments JSON-encoded as a string (some templates do this), and an unclosed block at the end
    raw = '<tool_call>{"name": "submit", "arguments": "{\\"answer\\": \\"42\\"}"}'
    assert parse_action(raw, TOOLS, "run_tests") == ToolCall("submit", {"answer": "42"})


@pytest.mark.parametrize("text, says", [
    ('<tool_call>{"name": "submit", "arguments": {"answer": 4</tool_call>', "not JSON"),
    ('<tool_call>["submit"]</tool_call>', '{"name": TOOL'),
    ('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', "unknown tool 'rm_rf'"),
    ('<tool_call>{"name": "submit", "arguments": {}}</tool_call>', "'answer' is a required property"),
    ('<tool_call>{"name": "submit", "arguments": {"answer": 4}}</tool_call>', "answer: 4 is not of type"),
    ('<tool_call>{"name": "submit", "arguments": {"answer": "4", "x": 1}}</tool_call>',
     "Additional properties"),
    ('<tool_call>{"name": "write_file", "arguments": {"path": "../etc/passwd", "content": ""}}'
     '</tool_call>', "path: '../etc/passwd' does not match"),
    ('<tool_call>{"name": "submit", "arguments": "not json"}</tool_call>', "not a JSON object"),
])
def test_a_bad_call_is_refused_saying_what_is_wrong(text, says):
    with pytest.raises(ToolCallError) as e:
        parse_action(text, TOOLS, "run_tests")
    assert says in str(e.value)


def test_an_oversized_action_is_refused_before_parsing():
    text = "<tool_call>" + json.dumps({"name": "submit", "arguments": {"answer": "x" * MAX_ACTION_CHARS}})
    with pytest.raises(ToolCallError, match="characters; at most"):
        parse_action(text, TOOLS, "run_tests")


def test_only_offered_tools_can_be_called():
    with pytest.raises(ToolCallError, match="the tools are run_tests, submit"):
        parse_action('<tool_call>{"name": "run_shell", "arguments": {"command": "ls"}}</tool_call>',
                     (RUN_TESTS, SUBMIT), "run_tests")
