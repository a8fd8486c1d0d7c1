"""The `standin` backend: a policy with no model, for load tests of the pipeline at scale.

    flywheel run --policy standin --policy-options mode=digits ...

It answers at once, so what a load test measures is the pipeline (reading tasks, the sandbox,
verifiers, tables, the trainer's reading), never a model. `mode=fixed` answers `response` to
every prompt; `mode=digits` answers a number of 1 to 3 digits drawn from the row's seed (so
groups have some reward variance). Log-probabilities are a constant (LOGPROB); its one trainable
parameter leaves every value unchanged but takes gradients, so a train step runs and changes it.
Byte-level token ids, as the `tiny` backend's.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence

import torch

from flywheel.policy.backends import POLICIES
from flywheel.policy.backends.tiny import tokens
from flywheel.policy.policy import PolicyDefaults, Sample
from flywheel.policy.rollout_engine import InProcessEngine

LOGPROB = -0.5
MODES = ("fixed", "digits")


class _Bias(torch.nn.Module):
    """The one trainable parameter, and a buffer naming the answering rule (sha256 of `rule`), so
    that the policy's digest (policy/checkpoint.py: over the state_dict) tells two rules apart:
    a worker that keeps its engine while the digest holds never answers by a stale rule."""

    def __init__(self, rule: bytes = b""):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(1))
        self.register_buffer("rule", torch.tensor(list(hashlib.sha256(rule).digest()),
                                                  dtype=torch.uint8))


class ModelFree(PolicyDefaults):
    """What the backends without a model (standin, scripted) share: byte-level ids as the `tiny`
    backend's, a constant log-probability (LOGPROB) per token, and one trainable parameter that
    leaves every value unchanged but takes gradients, so a train step runs and changes it."""

    pretrained = True  # nothing to warm-start
    local_engine = "model-free"  # ModelFreeEngine: each row's `answer`
    pad_id = tokens.PAD
    eos_ids = (tokens.EOS,)
    encode_prompt = staticmethod(tokens.encode_prompt)
    encode_response = staticmethod(tokens.encode_response)
    decode = staticmethod(tokens.decode)

    def __init__(self, rule: bytes = b""):
        self.module = _Bias(rule)

    @staticmethod
    def answers(texts: Sequence[str], max_new_tokens: int) -> list[Sample]:
        """Each text as a sample: its ids (cut to max_new_tokens), LOGPROB each."""
        samples = []
        for text in texts:
            ids = tokens.encode_response(text)[:max_new_tokens]
            samples.append(Sample(ids, [LOGPROB] * len(ids),
                                  "stop" if ids and ids[-1] == tokens.EOS else "length"))
        return samples

    def with_bias(self, saved: Mapping):
        """This policy with the trained parameter a checkpoint saved."""
        with torch.no_grad():
            self.module.bias.fill_(saved["bias"])
        return self

    def token_logprobs(self, input_ids: torch.Tensor, attn_mask: torch.Tensor,
                       temperatures: torch.Tensor, score_from: int = 0) -> torch.Tensor:
        """(B, T) -> (B, T-1) of LOGPROB, with a gradient of 1 to the bias."""
        bias = self.module.bias
        return torch.full(input_ids[:, 1:].shape, LOGPROB, device=input_ids.device) + (bias - bias.detach())


@POLICIES.register("standin")
class StandinPolicy(ModelFree):
    context = 1 << 16

    def __init__(self, mode: str = "digits", response: str = "0"):
        if mode not in MODES:
            raise ValueError(f"standin policy: mode {mode!r} is not one of {MODES}")
        super().__init__(json.dumps(["standin", mode, str(response)]).encode())
        self.mode, self.response = mode, str(response)

    @classmethod
    def create(cls, options: Mapping[str, object], seed: int,
               device: str | torch.device = "cpu") -> StandinPolicy:
        unknown = set(options) - {"mode", "response"}
        if unknown:
            raise ValueError(f"standin policy: unknown options {sorted(unknown)}; it takes mode, response")
        return cls(**options)

    def save(self, uri: str) -> dict:
        return {"mode": self.mode, "response": self.response, "bias": self.module.bias.item()}

    @classmethod
    def load(cls, uri: str, saved: Mapping, device: str | torch.device = "cpu") -> StandinPolicy:
        return cls(saved["mode"], saved["response"]).with_bias(saved)

    def answer(self, prompt: Sequence[int], seed: int) -> str:
        """The fixed response, or digits drawn from the row's seed."""
        return self.response if self.mode == "fixed" else str(random.Random(seed).randrange(1000))


class ModelFreeEngine(InProcessEngine):
    """The rollout engine of the policies without a model (policy/rollout_engine.py
    "model-free"): each row's `answer(prompt, seed)` as a sample."""

    def draw(self, policy, prompts, temperatures, seeds, max_new_tokens) -> list[Sample]:
        return policy.answers([policy.answer(p, s) for p, s in zip(prompts, seeds)], max_new_tokens)
