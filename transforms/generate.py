"""Generate: the policy samples each attempt's response through Beam RunInference.

PolicyModelHandler loads the tiny torch policy (from a checkpoint URI, or built from its config
and seed) once per worker, and samples a batch of attempts together. Each attempt's tokens depend
only on its own seed, so results do not depend on how Beam batched the elements.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference

from flywheel.transforms.errors import count, now


def fit_prompt(ids: list[int], limit: int) -> list[int]:
    """Keep BOS and the last tokens of a prompt longer than `limit` (the end holds the question).

    The trajectory row stores the ids the policy actually saw, so training stays consistent.
    """
    if len(ids) <= limit:
        return ids
    count("prompts_truncated")
    return ids[:1] + ids[len(ids) - (limit - 1):]


def generate_batch(model, batch: Sequence[dict]) -> list[dict]:
    """Sample one response per attempt: token ids, logprobs, finish reason and decoded text."""
    from flywheel.trainer.sampling import sample
    from flywheel.trainer.tokens import decode, encode_prompt
    started = now()
    max_new = max(a["max_new_tokens"] for a in batch)
    prompts = [fit_prompt(encode_prompt(a["prompt"]), model.cfg.context - max_new) for a in batch]
    samples = sample(model, prompts, [a["temperature"] for a in batch], [a["seed"] for a in batch],
                     max_new)
    results = []
    for attempt, prompt_ids, s in zip(batch, prompts, samples):
        ids, logprobs, finish = list(s.token_ids), list(s.logprobs), s.finish_reason
        limit = attempt["max_new_tokens"]
        if len(ids) > limit:  # the batch ran to a longer limit than this attempt's own
            ids, logprobs, finish = ids[:limit], logprobs[:limit], "length"
        results.append({"prompt_token_ids": prompt_ids, "response_token_ids": ids,
                        "response_logprobs": logprobs, "finish_reason": finish,
                        "response": decode(ids), "started_at": started})
    return results


class PolicyModelHandler(ModelHandler[dict, PredictionResult, Any]):
    """RunInference handler for the built-in byte-level policy."""

    def __init__(self, checkpoint_uri: str | None, *, policy_config: dict | None = None,
                 init_seed: int = 0, max_batch_size: int = 256):
        self.checkpoint_uri = checkpoint_uri
        self.policy_config = policy_config or {}
        self.init_seed = init_seed
        self.max_batch_size = max_batch_size

    def load_model(self):
        from flywheel.trainer.checkpoint import load_checkpoint
        from flywheel.trainer.model import PolicyConfig, build_policy
        from flywheel.trainer.train_step import pick_device
        device = pick_device()
        if self.checkpoint_uri:
            model = load_checkpoint(self.checkpoint_uri, device=device).model
        else:
            model = build_policy(PolicyConfig.from_dict(self.policy_config), self.init_seed).to(device)
        model.eval()  # sampling runs under no_grad; grad mode stays global and untouched
        return model

    def run_inference(self, batch: Sequence[dict], model, inference_args=None) -> Iterable[PredictionResult]:
        return [PredictionResult(a, out) for a, out in zip(batch, generate_batch(model, batch))]

    def batch_elements_kwargs(self):
        # BatchElements grows batches from min_batch_size; starting at 1 wastes the first dozens
        # of calls on tiny batches (each sampling call has a fixed cost), so start large.
        return {"min_batch_size": max(1, self.max_batch_size // 4), "max_batch_size": self.max_batch_size}


class Generate(beam.PTransform):
    """Attempts in, attempts with response text, token ids and logprobs out."""

    def __init__(self, handler: PolicyModelHandler):
        super().__init__()
        self.handler = handler

    def expand(self, attempts):
        return (attempts
                | "Sample" >> RunInference(self.handler)
                | "Attach" >> beam.Map(lambda r: {**r.example, **r.inference}))
