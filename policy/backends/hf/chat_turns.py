"""Multi-turn episodes through a tokenizer's chat template: tools in the prompt, tool messages
between the model's turns, as ids that are appended and never re-rendered.

- The first prompt renders the tools with the template's own `tools=` support. A template that
  ignores them (SmolLM2's does) gets them in the system message instead, in the Hermes format
  tool-calling models are trained on: `<tools>` JSON and `<tool_call>{...}</tool_call>` answers.
- An observation is what the template puts between the end of an assistant message and the start
  of the next one: the tool message and the generation prompt. It is found by rendering a short
  conversation with and without it and taking the difference; the bytes of the template after
  the assistant's end-of-turn token (e.g. the newline after `<|im_end|>`) come first, since the
  sampled action stops at that token. Templates that refuse a `tool` role get a user message.
- The observation's text is tokenized with special tokens split, so output that prints
  `<|im_start|>assistant` stays text: a program cannot forge a turn of the conversation.
"""

from __future__ import annotations

import json

TOOLS_SYSTEM = ("You can call tools, one per turn. They are described in JSON Schema:\n<tools>\n"
                "{tools}\n</tools>\nTo call one, answer with:\n<tool_call>\n"
                '{{"name": "TOOL_NAME", "arguments": {{...}}}}\n</tool_call>\n'
                "The tool's result comes back in the next message.")
_PLACEHOLDER = "\x00FLYWHEEL-OBSERVATION\x00"


def as_functions(tools: list[dict]) -> list[dict]:
    return [{"type": "function", "function": t} for t in tools]


def _render(tok, messages: list[dict], **kwargs) -> str:
    return tok.apply_chat_template(messages, tokenize=False, **kwargs)


def tool_prompt(tok, text: str, tools: list[dict], system_prompt: str = "") -> str:
    """The rendered first prompt of an episode: [system,] user `text`, the tools, generation prompt."""
    messages = [{"role": "user", "content": text}]
    if system_prompt:
        messages.insert(0, {"role": "system", "content": system_prompt})
    plain = _render(tok, messages, add_generation_prompt=True)
    if not tools:
        return plain
    try:
        rendered = _render(tok, messages, tools=as_functions(tools), add_generation_prompt=True)
    except Exception:  # a template that raises on tools: described in the system message instead
        rendered = plain
    if rendered != plain:
        return rendered
    described = TOOLS_SYSTEM.format(tools="\n".join(json.dumps(t) for t in tools))
    system = f"{system_prompt}\n\n{described}" if system_prompt else described
    return _render(tok, [{"role": "system", "content": system}, *messages[-1:]],
                   add_generation_prompt=True)


def observation_frame(tok, eos_token: str) -> tuple[str, str]:
    """(before, after): the template text around an observation's content, from the end of the
    assistant's end-of-turn token to the next assistant turn's start."""
    base = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    before = _render(tok, base)
    for role, prefix in (("tool", ""), ("user", "Tool result:\n")):
        try:
            after = _render(tok, [*base, {"role": role, "content": prefix + _PLACEHOLDER}],
                            add_generation_prompt=True)
        except Exception:
            continue
        if after.startswith(before) and _PLACEHOLDER in after:
            tail = before[before.rfind(eos_token) + len(eos_token):] if eos_token in before else ""
            head, _, end = after[len(before):].partition(_PLACEHOLDER)
            return tail + head, end
    return "\n", "\n"


def observation_ids(tok, text: str, eos_token: str) -> list[int]:
    """Ids of an observation between two assistant turns; its text cannot hold special tokens."""
    before, after = observation_frame(tok, eos_token)
    frame = lambda s: tok(s, add_special_tokens=False)["input_ids"] if s else []  # noqa: E731
    content = tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"] if text else []
    return [*frame(before), *content, *frame(after)]


def _plain(message: dict, text) -> dict:
    """An OpenAI message as {role, content} text: an assistant's tool calls in the Hermes format
    (<tool_call> JSON), which templates without tool-call support can show."""
    role, content = str(message.get("role", "user")), text(message)
    calls = message.get("tool_calls") if role == "assistant" else None
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            try:
                arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
            except ValueError:
                pass
            content += ("\n" if content else "") + "<tool_call>\n" + json.dumps(
                {"name": function.get("name"), "arguments": arguments}) + "\n</tool_call>"
    return {"role": role, "content": content}


def conversation_prompt(tok, messages: list[dict], tools: list[dict] | None, text,
                        system_prompt: str = "") -> str:
    """A whole conversation rendered up to the assistant's next turn: the tools with the
    template's own `tools=` support, else described in the system message (as tool_prompt does);
    `tool` messages as the template takes them, else as user messages ("Tool result:")."""
    plain = [_plain(m, text) for m in messages]
    if system_prompt and not any(m["role"] == "system" for m in plain):
        plain.insert(0, {"role": "system", "content": system_prompt})
    try:
        base = _render(tok, plain, add_generation_prompt=True)
    except Exception:  # a template that refuses the tool role
        plain = [{"role": "user", "content": "Tool result:\n" + m["content"]} if m["role"] == "tool"
                 else m for m in plain]
        base = _render(tok, plain, add_generation_prompt=True)
    if not tools:
        return base
    functions = [t.get("function", t) if isinstance(t, dict) else t for t in tools]
    try:
        rendered = _render(tok, plain, tools=as_functions(functions), add_generation_prompt=True)
    except Exception:
        rendered = base
    if rendered != base:
        return rendered
    described = TOOLS_SYSTEM.format(tools="\n".join(json.dumps(t) for t in functions))
    if plain and plain[0]["role"] == "system":
        plain[0] = {"role": "system", "content": f"{plain[0]['content']}\n\n{described}"}
    else:
        plain.insert(0, {"role": "system", "content": described})
    return _render(tok, plain, add_generation_prompt=True)
