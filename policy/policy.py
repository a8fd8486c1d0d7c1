"""The `Policy` protocol: what rollout, warm start, trainer and checkpoints ask of a policy backend.

Token ids are the source of truth. A backend turns text into ids (`encode_prompt`,
`encode_response`) and ids into text (`decode`); a rollout engine (rollout_engine.py) samples
it, returning the exact ids it drew with one log-probability each, and the trainer scores those
same ids again (`token_logprobs`) without ever re-tokenizing text. A policy never samples
itself: its in-process engine (`local_engine`) or the one its options name (`engine`, vLLM's
running an export of its weights) does. Everything
else about a backend (its tokenizer, its KV cache, the library that runs it) stays behind this
protocol; backends register by name in `flywheel.policy.backends.POLICIES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import torch


@dataclass
class Sample:
    """One sampled continuation of one prompt."""
    token_ids: list[int]
    logprobs: list[float]  # of each token under the sampling distribution (T=1 when greedy)
    finish_reason: Literal["stop", "length"]  # stop: ended with an EOS id; length: out of tokens


@runtime_checkable
class Policy(Protocol):
    """A trainable language-model policy, its tokenizer and its files."""

    @property
    def context(self) -> int:
        """Most tokens (prompt + response) one sequence may hold."""

    @property
    def pad_id(self) -> int:
        """The id that fills batch padding (never attended to, never a target)."""

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Ids that end a response; the sampler stops on any of them."""

    @property
    def module(self) -> torch.nn.Module:
        """The trainable network: parameters for the optimizer, train()/eval(), to(device)."""

    def encode_prompt(self, text: str) -> list[int]:
        """The ids the policy is conditioned on (with the backend's BOS or chat template)."""

    def encode_response(self, text: str) -> list[int]:
        """A demonstration response as ids, ending in an EOS id: what the policy should emit."""

    def decode(self, ids: Sequence[int]) -> str:
        """Text of response ids up to the first EOS id; special tokens are left out."""

    local_engine: str  # the rollout engine that samples it in this process (rollout_engine.py)

    @property
    def engine(self) -> str:
        """The rollout engine that samples it in a run (PolicyDefaults: `local_engine`)."""

    def encode_tool_prompt(self, text: str, tools: list[dict]) -> list[int]:
        """An episode's first prompt with its tools (PolicyDefaults: the plain prompt)."""

    def encode_observation(self, text: str) -> list[int]:
        """An observation between two turns (PolicyDefaults: the text without EOS)."""

    def encode_messages(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        """A chat conversation (OpenAI-style {role, content} dicts, with the request's `tools`)
        up to the assistant's next turn (PolicyDefaults: the texts, one per line, tools unseen)."""

    def token_logprobs(self, input_ids: torch.Tensor, attn_mask: torch.Tensor,
                       temperatures: torch.Tensor, score_from: int = 0) -> torch.Tensor:
        """Log-probability of each next token under the sampling distribution, with autograd.

        input_ids (B, T) long, right-padded with `pad_id`; attn_mask (B, T) bool, True at real
        tokens; temperatures (B,) float, 0 meaning greedy (scored at T=1) -> (B, T-1) float32,
        entry t scoring input_ids[:, t+1]. Positions whose target is padding hold finite values
        of no meaning (callers mask them out). For sampled ids this equals `Sample.logprobs`
        (what its engine recorded).
        Entries t < `score_from` (the prompts' positions, which the trainer never scores) may be
        0 without a gradient: a backend need not run its output layer there.
        """

    def save(self, uri: str) -> dict:
        """Write the backend's own files under `uri` and return what `load` needs besides them
        (JSON-able; the checkpoint stores it in config.json). The names config.json and
        optimizer.pt belong to the checkpoint: a library that writes its own config.json (as
        Hugging Face's save_pretrained does) writes into a subfolder."""

    @classmethod
    def load(cls, uri: str, saved: Mapping, device: str | torch.device = "cpu") -> Policy:
        """The policy written by `save(uri)`, which returned `saved`, on `device`."""

    @classmethod
    def create(cls, options: Mapping[str, object], seed: int,
               device: str | torch.device = "cpu") -> Policy:
        """A fresh policy from backend options (KEY=VALUE settings of the run; unknown keys are
        an error); the same (options, seed) gives the same weights anywhere."""


class PolicyDefaults:
    """What a backend may override, with defaults: the rollout engine that samples it, and how
    an episode's tool prompt and observations read (a chat template frames them its own way).

    Backends inherit it, so callers call these methods and never probe for them."""

    # Methods of `module` that score tokens without going through its forward: FSDP
    # (trainer/distributed.shard_module) gathers a unit's weights only around a forward, so it
    # registers these as forwards of the root too.
    fsdp_forward_methods: tuple[str, ...] = ()

    @property
    def engine(self) -> str:
        """The name of the rollout engine that samples this policy in a run
        (rollout_engine.ENGINES): by default its in-process one, `local_engine`."""
        return self.local_engine

    def encode_tool_prompt(self, text: str, tools: list[dict]) -> list[int]:
        """An episode's first prompt, with the tools where the format shows them: by default the
        plain prompt."""
        return self.encode_prompt(text)

    def encode_messages(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        """Ids of a conversation up to the assistant's next turn: without a chat template, each
        message's text on its own line (the last user message alone reads as encode_prompt's);
        a policy without a chat format does not see `tools`."""
        texts = [message_text(m) for m in messages]
        return self.encode_prompt("\n".join(t for t in texts if t))

    def encode_observation(self, text: str) -> list[int]:
        """Ids of an observation, as the policy reads it between two of its own turns: by
        default the text as a response, without its closing EOS."""
        ids = self.encode_response(text)
        return ids[:-1] if ids and ids[-1] in self.eos_ids else ids


def message_text(message: dict) -> str:
    """A chat message's text: its `content` string, or the text parts of a content list; any
    other shape (a part whose `text` is no string, a message that is no object) has none."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return content if isinstance(content, str) else ""
