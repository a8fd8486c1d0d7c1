"""Logged LLM interactions, in the shapes people keep them, read into one `Record`.

    {"messages": [..., {"role": "assistant", ...}]}                       OpenAI fine-tuning
    {"request": {"messages": [...]}, "response": {"choices": [...]}}      request/response log
    {"custom_id": ..., "body": {...}, "response": {"body": {...}}}        OpenAI batch API
    {"input": {"messages": [...]}, "preferred_output": [...], "non_preferred_output": [...]}  DPO
    {"prompt": ..., "response": ..., "feedback": "up", "correction": ..., "chosen": ..., ...}
    a `flywheel serve` recorder's interactions row with its feedback rows      (interaction_record)

A shape that cannot be read raises `FormatProblem` with an error type and what was expected, so
the importer turns it into an error row and goes on. Outcome signals (`feedback`, `rating`,
`thumbs`, `ci`, `outcome`, `correction`, top-level or under `metadata`) become one score in
[0, 1]: thumbs up and CI pass are 1, down and fail are 0; several signals keep the lowest, so a
failed CI outweighs a thumbs up. `read_lines` streams a JSONL file's lines (bounded in length);
`recorder_rows` a recorder's interactions with their feedback.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from flywheel.schemas.read import scan_batches, table_dataset
from flywheel.schemas.tables import TABLES

SHAPES = ("{messages}, {request, response}, {custom_id, body, response}, "
          "{input, preferred_output, non_preferred_output}, {prompt, response | correction | chosen+rejected}")
RATING_KEYS = ("feedback", "rating", "thumbs")
OUTCOME_KEYS = ("ci", "outcome")
GOOD_WORDS = {"up", "thumbs_up", "thumbsup", "good", "positive", "like", "yes", "true", "+1",
              "\U0001f44d", "pass", "passed", "success", "succeeded", "ok", "green", "ci_pass"}
BAD_WORDS = {"down", "thumbs_down", "thumbsdown", "bad", "negative", "dislike", "no", "false",
             "-1", "\U0001f44e", "fail", "failed", "failure", "error", "red", "ci_fail"}
PAYLOAD_CHARS = 2000  # an error row keeps this much of its line
EXPECTED_RATING = "up/down, +1/-1, true/false, pass/fail or a score in [0, 1]"


class FormatProblem(ValueError):
    """A line that cannot be read as an interaction; `kind` is its error type."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class Record:
    """One logged interaction, whatever its shape: the conversation before the response, the
    response, and what is known of its outcome."""
    source: str                              # openai | plain | interactions
    messages: list[dict]                     # the conversation before the response
    response: str | None = None
    score: float | None = None               # the outcome in [0, 1]; None: no signal
    correction: str | None = None
    chosen: str | None = None
    rejected: str | None = None
    curated: bool = False                    # fine-tuning data: good unless a signal says not
    domain: str | None = None
    record_id: str | None = None             # the input's own id (interaction id, custom_id)
    created_at: dt.datetime | None = None
    prompt_token_ids: list[int] | None = None
    response_token_ids: list[int] | None = None
    token_source: str | None = None
    raw: dict = field(default_factory=dict)  # the input as read: `--field` paths point into it

    @property
    def prompt(self) -> str:
        users = [m for m in self.messages if m.get("role") == "user"]
        return message_text(users[-1]) if users else ""


def message_text(message: dict) -> str:
    """A chat message's text: its `content` string, or the text parts of a content list (a part
    whose `text` is no string has none; `message_problem` names it where a file is read)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return content if isinstance(content, str) else ""


def message_problem(value: Any, where: str) -> str | None:
    """What is wrong with `value` as a list of chat messages, naming the field (`messages[2]
    .content[0].text`), or None: each message an object with a string `role` and a `content`
    that is null, a string or a list of part objects whose `text`, if any, is a string."""
    if not isinstance(value, list):
        return f"`{where}`: expected a list of {{role, content}} message objects, got {_kind(value)}"
    for i, m in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(m, dict):
            return f"`{at}`: expected a {{role, content}} message object, got {_kind(m)}"
        if not isinstance(m.get("role"), str):
            return f"`{at}.role`: expected a string, got {_kind(m.get('role'))}"
        content = m.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            return f"`{at}.content`: expected a string or a list of parts, got {_kind(content)}"
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                return f"`{at}.content[{j}]`: expected a part object, got {_kind(part)}"
            if "text" in part and not isinstance(part["text"], str):
                return f"`{at}.content[{j}].text`: expected a string, got {_kind(part['text'])}"
    return None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def parse_record(obj: dict[str, Any]) -> Record:
    """`obj` (one JSON line) as a Record; FormatProblem when its shape is none of SHAPES."""
    if "input" in obj and ("preferred_output" in obj or "non_preferred_output" in obj):
        return _dpo(obj)
    if "custom_id" in obj and "body" in obj:
        response = obj.get("response")
        if isinstance(response, dict) and response.get("error") or not isinstance(response, dict):
            raise FormatProblem("missing_response", "the batch request has no response body "
                                "(expected `response.body` with `choices`)")
        return _request(obj, _object(obj["body"], "body"), response.get("body"), obj["custom_id"])
    if "request" in obj and "response" in obj:
        return _request(obj, _object(obj["request"], "request"), obj["response"], None)
    if "messages" in obj:
        return _fine_tuning(obj)
    if "prompt" in obj:
        return _plain(obj)
    raise FormatProblem("unknown_shape", "no `messages`, `request`, `custom_id`, `input` or "
                        f"`prompt` field: expected one of the shapes {SHAPES}; got the keys "
                        f"{', '.join(map(str, sorted(obj)[:12])) or 'none'}")


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise FormatProblem("unknown_shape", f"`{where}`: expected an object, got {_kind(value)}")
    return value


def _messages(value: Any, where: str) -> list[dict]:
    problem = message_problem(value, where)
    if problem:
        raise FormatProblem("unknown_shape", problem)
    return value


def _reply(message: Any, where: str) -> str:
    """An assistant message's text; its tool calls as JSON where it has no text."""
    if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
        raise FormatProblem("missing_response", f"`{where}`: expected an assistant message")
    text = message_text(message)
    if not text and message.get("tool_calls"):
        text = json.dumps(message["tool_calls"], ensure_ascii=False)
    if not text:
        raise FormatProblem("missing_response", f"`{where}`: the assistant message is empty")
    return text


def _fine_tuning(obj: dict) -> Record:
    messages = _messages(obj["messages"], "messages")
    if not messages:
        raise FormatProblem("missing_response", "`messages` is empty: expected the conversation "
                            "ending in the assistant's response")
    if messages[-1]["role"] != "assistant":
        raise FormatProblem("missing_response", "`messages`: expected the last message to be the "
                            f"assistant's response, got role {messages[-1]['role']!r}")
    return _with_signals(Record("openai", messages[:-1], _reply(messages[-1], "messages[-1]"),
                                curated=True, record_id=_text(obj.get("id"))), obj)


def _request(obj: dict, request: dict, response: Any, custom_id: Any) -> Record:
    messages = _messages(request.get("messages"), "request.messages")
    if not isinstance(response, dict) or not isinstance(response.get("choices"), list) \
            or not response["choices"]:
        raise FormatProblem("missing_response", "`response`: expected an object with a non-empty "
                            "`choices` list")
    reply = _reply(response["choices"][0].get("message") if isinstance(response["choices"][0], dict)
                   else None, "response.choices[0].message")
    created = response.get("created")
    record = Record("openai", messages, reply, record_id=_text(custom_id or response.get("id")),
                    created_at=_time(created))
    return _with_signals(record, obj, request.get("metadata"))


def _dpo(obj: dict) -> Record:
    messages = _messages(_object(obj["input"], "input").get("messages"), "input.messages")
    pair = []
    for key in ("preferred_output", "non_preferred_output"):
        outputs = obj.get(key)
        if not isinstance(outputs, list) or not outputs:
            raise FormatProblem("missing_response", f"`{key}`: expected a list holding the "
                                "assistant message")
        pair.append(_reply(outputs[-1], f"{key}[-1]"))
    return _with_signals(Record("openai", messages, chosen=pair[0], rejected=pair[1],
                                record_id=_text(obj.get("id"))), obj)


def _plain(obj: dict) -> Record:
    prompt = obj["prompt"]
    if isinstance(prompt, list):
        messages = _messages(prompt, "prompt")
    elif isinstance(prompt, str) and prompt:
        messages = [{"role": "user", "content": prompt}]
    else:
        raise FormatProblem("unknown_shape", "`prompt`: expected a non-empty string or a list of "
                            "messages")
    record = Record("plain", messages, _text(obj.get("response")) or None,
                    chosen=_text(obj.get("chosen")) or None,
                    rejected=_text(obj.get("rejected")) or None, record_id=_text(obj.get("id")),
                    created_at=_time(obj.get("created_at")))
    record = _with_signals(record, obj)
    if (record.chosen is None) != (record.rejected is None):
        raise FormatProblem("missing_response", "expected both `chosen` and `rejected` (non-empty "
                            "strings): one of them is missing")
    if record.response is None and record.correction is None and record.chosen is None:
        raise FormatProblem("missing_response", "expected `response` (a string), `correction` or "
                            "`chosen` and `rejected`")
    return record


def _with_signals(record: Record, obj: dict, *more: Any) -> Record:
    """`record` with the outcome signals of `obj`, its `metadata`, and `more` dicts."""
    places = [obj, obj.get("metadata"), *more]
    places = [p for p in places if isinstance(p, dict)]
    scores = []
    for place in places:
        for key in (*RATING_KEYS, *OUTCOME_KEYS):
            if place.get(key) is not None:
                scores.append(parse_score(place[key], key))
        if record.correction is None and place.get("correction") is not None:
            record.correction = _correction(place["correction"])
        record.domain = record.domain or _text(place.get("domain")) or None
    record.score = min(scores) if scores else None
    record.raw = obj
    return record


def parse_score(value: Any, key: str = "rating") -> float:
    """An outcome signal as a score in [0, 1] (see EXPECTED_RATING); FormatProblem otherwise."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str):
        text = value.strip().lower()
        word = text.replace(" ", "_").replace("-", "_")
        if text in GOOD_WORDS or word in GOOD_WORDS:
            return 1.0
        if text in BAD_WORDS or word in BAD_WORDS:
            return 0.0
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, dict):  # e.g. {"status": "pass"} or {"rating": 1}
        inner = next((value[k] for k in ("status", "conclusion", "result", "rating", "value", "score")
                      if k in value), None)
        return parse_score(inner, key) if inner is not None else parse_score(None, key)
    if isinstance(value, int) and not -1 <= value <= 1:
        value = math.inf  # a huge int has no float: out of range either way
    if isinstance(value, (int, float)) and math.isfinite(value):
        if value == -1:
            return 0.0
        if 0 <= value <= 1:
            return float(value)
    raise FormatProblem("bad_rating", f"`{key}`: {json.dumps(value)[:80]} does not parse; "
                        f"expected {EXPECTED_RATING}")


def _correction(value: Any) -> str | None:
    text = message_text(value) if isinstance(value, dict) else value
    if not isinstance(text, str):
        raise FormatProblem("unknown_shape", "`correction`: expected a string or an assistant message")
    return text or None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _time(value: Any) -> dt.datetime | None:
    """A Unix time (OpenAI's `created`) or an ISO-8601 string; None when neither."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return dt.datetime.fromtimestamp(value, dt.timezone.utc)
        if isinstance(value, str):
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def interaction_record(row: dict[str, Any], feedback: list[dict[str, Any]]) -> Record:
    """A recorder's interactions row (messages already parsed from JSON) with its feedback rows:
    the latest rated feedback gives the score, the latest correction of any row counts."""
    messages = _messages(row.get("messages"), "messages")
    if not row.get("response"):
        raise FormatProblem("missing_response", "the interaction has no response")
    ordered = sorted(feedback, key=lambda f: f.get("created_at") or dt.datetime.min.replace(
        tzinfo=dt.timezone.utc))
    score = correction = None
    for f in ordered:
        if f.get("rating") is not None:
            score = parse_score(f["rating"], f"feedback {f.get('feedback_id')}: rating")
        elif _is_signal_word(f.get("label")):  # a label need not be a rating ("spam", ...)
            score = parse_score(f["label"], f"feedback {f.get('feedback_id')}: label")
        correction = f.get("correction") or correction
    return Record("interactions", messages, row["response"], score=score, correction=correction,
                  record_id=choice_id(row), created_at=row.get("created_at"),
                  prompt_token_ids=row.get("prompt_token_ids"),
                  response_token_ids=row.get("response_token_ids"),
                  token_source=row.get("checkpoint_digest"), raw=row)


def _is_signal_word(label: Any) -> bool:
    return isinstance(label, str) and label.strip().lower() in GOOD_WORDS | BAD_WORDS


def read_lines(path: str, limit: int) -> Iterator[tuple[int, str | None, str | None, str]]:
    """(line number, text or None, problem or None, error type) of every line of `path` (.gz
    read through), streamed in 64 KiB chunks; a line over `limit` bytes is a problem, its start
    kept (PAYLOAD_CHARS) and the rest skipped unread into memory."""
    from apache_beam.io.filesystems import FileSystems
    number, buf, over, head = 0, bytearray(), 0, b""

    def finish():
        if over:
            return (number, head.decode("utf-8", "replace"),
                    f"the line has {over:,} bytes: expected at most {limit:,}", "line_too_long")
        try:
            return number, bytes(buf).decode("utf-8"), None, ""
        except UnicodeDecodeError as e:
            return number, bytes(buf).decode("utf-8", "replace"), f"not UTF-8: {e}", "not_utf8"

    with FileSystems.open(path) as f:
        while True:
            try:
                chunk = f.read(1 << 16)
            except (OSError, EOFError, zlib.error) as e:
                yield number + 1, None, f"the file cannot be read past here: {e}", "unreadable_file"
                return
            if not chunk:
                break
            start = 0
            while start <= len(chunk):
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if over:
                    over += len(piece)
                else:
                    buf += piece
                    if len(buf) > limit:
                        over, head = len(buf), bytes(buf[:PAYLOAD_CHARS])
                        buf.clear()
                if end < 0:
                    break
                number += 1
                if over or buf.strip():
                    yield finish()
                buf.clear()
                over, start = 0, end + 1
    if over or buf.strip():
        number += 1
        yield finish()


def choice_id(row: dict) -> str | None:
    """A recorded choice's name: the completion's id, with `#i` for choice i > 0 of n."""
    iid, choice = row.get("interaction_id"), row.get("choice_index") or 0
    return f"{iid}#{choice}" if iid and choice else iid


def recorder_rows(root: str) -> Iterator[tuple[dict, list[dict]]]:
    """(interaction row, its feedback rows) of a recorder folder, interactions streamed in
    batches; the feedback table is read whole (one small row per signal)."""
    feedback: dict[tuple[str, int], list[dict]] = {}
    for f in table_dataset(f"{root}/tables/feedback", "feedback").to_table().to_pylist():
        feedback.setdefault((f["interaction_id"], f.get("choice_index") or 0), []).append(f)
    dataset = table_dataset(f"{root}/tables/interactions", "interactions")
    for batch in scan_batches(dataset, "interactions", TABLES["interactions"].names, 256):
        for row in batch.to_pylist():
            yield row, feedback.get((row["interaction_id"], row.get("choice_index") or 0), [])
