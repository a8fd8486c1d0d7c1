"""The `tiny` backend: the built-in byte-level transformer behind the Policy protocol.

Its files in a checkpoint: model.pt (the state_dict); config.json's policy section holds the
architecture and the tokenizer spec, which a load checks against this code's.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from flywheel.policy.checkpoint import load_torch, save_torch
from flywheel.schemas.storage import join
from flywheel.policy.backends import POLICIES
from flywheel.policy.backends.tiny import tokens
from flywheel.policy.backends.tiny.model import (
    BANNED,
    TinyConfig,
    TinyTransformer,
    build_transformer,
    policy_logprobs,
)
from flywheel.policy.policy import PolicyDefaults


@POLICIES.register("tiny")
class TinyPolicy(PolicyDefaults):
    """A TinyTransformer with the byte tokenizer; options are TinyConfig's fields."""

    local_engine = "tiny"  # its sampler (tiny/sampling.py TinyEngine)
    pad_id = tokens.PAD
    eos_ids = (tokens.EOS,)

    def __init__(self, module: TinyTransformer):
        self.module = module

    @property
    def config(self) -> TinyConfig:
        return self.module.cfg

    @property
    def context(self) -> int:
        return self.module.cfg.context

    @classmethod
    def create(cls, options: Mapping[str, object], seed: int,
               device: str | torch.device = "cpu") -> TinyPolicy:
        return cls(build_transformer(TinyConfig.from_dict(options), seed).to(device))

    def save(self, uri: str) -> dict:
        save_torch(join(uri, "model.pt"), self.module.state_dict())
        return {"config": self.config.to_dict(), "tokenizer": tokens.TOKENIZER_SPEC}

    @classmethod
    def load(cls, uri: str, saved: Mapping, device: str | torch.device = "cpu") -> TinyPolicy:
        if saved["tokenizer"] != tokens.TOKENIZER_SPEC:
            raise ValueError(f"checkpoint tokenizer {saved['tokenizer']} != this code's "
                             f"{tokens.TOKENIZER_SPEC}")
        module = TinyTransformer(TinyConfig.from_dict(saved["config"]))
        module.load_state_dict(load_torch(join(uri, "model.pt"), device))
        return cls(module.to(device))

    encode_prompt = staticmethod(tokens.encode_prompt)
    encode_response = staticmethod(tokens.encode_response)
    decode = staticmethod(tokens.decode)
    encode_observation = staticmethod(tokens.encode_observation)  # tools: the plain-text protocol

    def token_logprobs(self, input_ids: torch.Tensor, attn_mask: torch.Tensor,
                       temperatures: torch.Tensor, score_from: int = 0) -> torch.Tensor:
        """(B, T) -> (B, T-1), see Policy (every position is scored: the head is tiny). Padding targets (PAD, which the distribution bans) are
        scored as token 0 instead of -inf, so masked-out positions stay finite."""
        logp = policy_logprobs(self.module(input_ids, attn_mask)[:, :-1].float(), temperatures)
        targets = input_ids[:, 1:]
        banned = torch.tensor(BANNED, device=targets.device)
        targets = torch.where(torch.isin(targets, banned), 0, targets)
        return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
