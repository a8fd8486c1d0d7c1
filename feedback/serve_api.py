"""What `flywheel serve` accepts and answers: OpenAI chat-completion requests checked against
bounds, and the OpenAI shapes of completions, models and errors (feedback/serve.py serves them).

A request is refused (400, OpenAI's error shape) rather than guessed at: a field of the wrong
type, a value out of range, `stream: true` (every answer is whole, so its token ids and
log-probabilities can be recorded with it), `top_logprobs` (the sampler keeps only the drawn
token's). Fields the server does not act on (top_p, stop, presence_penalty, user, ...) are
ignored, as many OpenAI-compatible servers do: what was actually done (temperature, max_tokens,
seed) is what the `interactions` table records.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from flywheel.policy.policy import Policy, Sample, message_text

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
MAX_SEED = 2**62  # seeds are int64 in the table; choice i of a request samples with seed + i
MAX_CHOICES = 64  # a feedback's choice_index is below it (n itself is capped lower, ApiLimits.max_n)
TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
         404: "not_found_error", 415: "invalid_request_error",
         405: "invalid_request_error", 411: "invalid_request_error", 413: "invalid_request_error",
         500: "server_error", 503: "server_overloaded"}


@dataclass(frozen=True)
class ApiLimits:
    """Bounds of one chat request, besides the body's size (ServiceLimits.max_body)."""

    max_messages: int = 256
    max_chars: int = 200_000       # all messages' texts together; also a correction's length
    max_tokens_cap: int = 512      # a request's max_tokens is cut to this
    max_n: int = 4                 # choices per request

    def __post_init__(self):
        for name in ("max_messages", "max_chars", "max_tokens_cap", "max_n"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)!r}")


class ApiError(Exception):
    """A request answered with `status` and OpenAI's error body."""

    def __init__(self, status: int, message: str, code: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}

    def body(self) -> dict:
        return error_body(self.status, self.message, self.code)


def error_body(status: int, message: str, code: str | None) -> dict:
    return {"error": {"message": message, "type": TYPES.get(status, "invalid_request_error"),
                      "param": None, "code": code}}


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict]
    tools: list[dict] | None
    model: str | None
    temperature: float
    max_tokens: int
    seed: int | None               # None: the server draws one (and records it)
    n: int
    logprobs: bool

    @property
    def prompt(self) -> str:
        """The last user message's text (the `prompt` column)."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return message_text(users[-1]) if users else ""


def parse_json(body: bytes) -> dict:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:  # recursion: [[[[...
        raise ApiError(400, f"the body is not valid JSON: {e}"[:300], "invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object", "invalid_json")
    return data


def parse_chat(data: dict, limits: ApiLimits) -> ChatRequest:
    """A chat-completions body as a ChatRequest, or ApiError(400) naming the field."""
    if data.get("stream"):
        raise ApiError(400, "stream: true is not supported: this server answers whole completions "
                       "(each is recorded with its token ids); send the request without stream",
                       "stream_unsupported")
    if data.get("top_logprobs"):
        raise ApiError(400, "top_logprobs is not supported: the sampler records the drawn token's "
                       "log-probability only; use logprobs: true", "unsupported_parameter")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", "invalid_messages")
    if len(messages) > limits.max_messages:
        raise ApiError(400, f"{len(messages)} messages: at most {limits.max_messages}", "too_many_messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise ApiError(400, f"messages[{i}] must be an object with a role of {', '.join(ROLES)}",
                           "invalid_messages")
        if not (m.get("content") is None or isinstance(m["content"], (str, list))):
            raise ApiError(400, f"messages[{i}].content must be a string or a list of parts",
                           "invalid_messages")
    chars = sum(len(message_text(m)) for m in messages)
    if chars > limits.max_chars:
        raise ApiError(400, f"messages hold {chars} characters: at most {limits.max_chars}",
                       "messages_too_long")
    tools = data.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise ApiError(400, "tools must be a list of objects", "invalid_tools")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "model must be a string", "invalid_model")
    temperature = _number(data, "temperature", 1.0, 0.0, 2.0)
    wanted = data.get("max_completion_tokens")
    wanted = data.get("max_tokens") if wanted is None else wanted
    max_tokens = limits.max_tokens_cap if wanted is None else \
        min(_integer({"max_tokens": wanted}, "max_tokens", 1, 1 << 31), limits.max_tokens_cap)
    seed = None if data.get("seed") is None else _integer(data, "seed", 0, MAX_SEED)
    n = 1 if data.get("n") is None else _integer(data, "n", 1, limits.max_n)
    logprobs = data.get("logprobs")
    if logprobs is not None and not isinstance(logprobs, bool):
        raise ApiError(400, "logprobs must be true or false", "invalid_logprobs")
    return ChatRequest(messages, tools, model, temperature, max_tokens, seed, n, bool(logprobs))


def _number(data: dict, name: str, default: float, low: float, high: float) -> float:
    value = data.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not \
            (math.isfinite(value) and low <= value <= high):
        raise ApiError(400, f"{name} must be a number in [{low}, {high}], not {value!r}"[:300],
                       f"invalid_{name}")
    return float(value)


def _integer(data: dict, name: str, low: int, high: int) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ApiError(400, f"{name} must be an integer in [{low}, {high}], not {value!r}"[:300],
                       f"invalid_{name}")
    return value


def parse_feedback(data: dict, limits: ApiLimits) -> dict:
    """The feedback columns of a /v1/feedback body: interaction_id and at least one of rating
    (+1, -1 or a score in [0, 1]), label (up, down, ...), correction, comment. A label of
    up/down without a rating also records the rating +1/-1."""
    interaction_id = data.get("interaction_id")
    if not isinstance(interaction_id, str) or not 0 < len(interaction_id) <= 200:
        raise ApiError(400, "interaction_id must be the completion's id (a string)", "invalid_interaction_id")
    choice = data.get("choice_index")
    if choice is not None and (isinstance(choice, bool) or not isinstance(choice, int)
                               or not 0 <= choice < MAX_CHOICES):
        raise ApiError(400, f"choice_index must be an integer in [0, {MAX_CHOICES})",
                       "invalid_choice_index")
    rating = data.get("rating")
    if rating is not None and (isinstance(rating, bool) or not isinstance(rating, (int, float))
                               or not (rating in (-1, 1) or 0 <= rating <= 1)):
        raise ApiError(400, f"rating must be +1, -1 or a score in [0, 1], not {rating!r}"[:300],
                       "invalid_rating")
    texts = {}
    for name, most in (("label", 64), ("correction", limits.max_chars), ("comment", 10_000)):
        value = data.get(name)
        if value is not None and not (isinstance(value, str) and len(value) <= most):
            raise ApiError(400, f"{name} must be a string of at most {most} characters", f"invalid_{name}")
        texts[name] = value
    if rating is None and texts["label"] is None and texts["correction"] is None \
            and texts["comment"] is None:
        raise ApiError(400, "feedback needs a rating, label, correction or comment", "empty_feedback")
    if rating is None and texts["label"] in ("up", "down"):
        rating = 1 if texts["label"] == "up" else -1
    return {"interaction_id": interaction_id, "choice_index": choice,
            "rating": None if rating is None else float(rating),
            **texts}


def completion_body(interaction_id: str, created: int, model: str, samples: list[Sample],
                    texts: list[str], prompt_tokens: int, token_texts: list[list[str]] | None) -> dict:
    """OpenAI's chat.completion object; `token_texts` (one list per choice) adds logprobs."""
    choices = []
    for i, (sample, text) in enumerate(zip(samples, texts)):
        logprobs = None if token_texts is None else {"content": [
            {"token": tok, "logprob": lp, "bytes": None, "top_logprobs": []}
            for tok, lp in zip(token_texts[i], sample.logprobs)], "refusal": None}
        choices.append({"index": i, "message": {"role": "assistant", "content": text},
                        "logprobs": logprobs, "finish_reason": sample.finish_reason})
    completion_tokens = sum(len(s.token_ids) for s in samples)
    return {"id": interaction_id, "object": "chat.completion", "created": created, "model": model,
            "choices": choices, "usage": {"prompt_tokens": prompt_tokens,
                                          "completion_tokens": completion_tokens,
                                          "total_tokens": prompt_tokens + completion_tokens}}


def models_body(model: str, created: int) -> dict:
    return {"object": "list", "data": [{"id": model, "object": "model", "created": created,
                                        "owned_by": "flywheel"}]}


REFUSAL_CODES = {400: "bad_request", 401: "invalid_api_key", 403: "foreign_origin",
                 404: "unknown_endpoint", 405: "method_not_allowed", 411: "length_required",
                 413: "body_too_large", 415: "unsupported_media_type"}


@dataclass(frozen=True)
class ServedPolicy:
    """The model a server answers with."""
    policy: Policy
    digest: str      # policy_digest of its weights: every row records it
    name: str        # the model name answered and recorded
