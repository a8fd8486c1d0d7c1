"""Generate: the policy samples each attempt's response through Beam RunInference.

The model handler (policy_model.py, shared with every Turn stage) holds the worker's policy and
rollout engine and samples a batch of attempts together. Each attempt's tokens depend only on its
own seed, so results do not depend on how Beam batched the elements. Only the Policy protocol is
used here: any backend fits. Each attempt records the digest of the weights the worker actually
loaded (`checkpoint_digest`), so the trainer can refuse rows sampled from any other policy than
the one it starts from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import apache_beam as beam
from apache_beam.ml.inference.base import RunInference

from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import count, now

if TYPE_CHECKING:  # torch loads in load_model, on the worker, not where the pipeline is built
    from flywheel.policy.policy import Policy
    from flywheel.policy.rollout_engine import RolloutEngine
    from flywheel.transforms.policy_model import PolicyModelHandler


def fit_prompt(ids: list[int], limit: int) -> list[int]:
    """Keep the first token (BOS) and the last tokens of a prompt longer than `limit` (the end
    holds the question).

    The trajectory row stores the ids the policy actually saw, so training stays consistent.
    """
    if len(ids) <= limit:
        return ids
    count("prompts_truncated")
    return ids[:1] + ids[len(ids) - (limit - 1):]


def generate_batch(policy: Policy, batch: Sequence[Attempt], engine: RolloutEngine) -> list[dict]:
    """Sample one response per attempt with `engine` (running `policy`'s weights; the policy
    encodes and decodes): the Attempt fields of its token ids, logprobs, finish reason and
    decoded text."""
    started = now()
    max_new = max(a.max_new_tokens for a in batch)
    prompts = [fit_prompt(policy.encode_prompt(a.prompt), policy.context - max_new) for a in batch]
    samples = engine.sample(prompts, [a.sampling_temperature for a in batch],
                            [a.seed for a in batch], max_new)
    results = []
    for attempt, prompt_ids, s in zip(batch, prompts, samples):
        ids, logprobs, finish = list(s.token_ids), list(s.logprobs), s.finish_reason
        limit = attempt.max_new_tokens
        if len(ids) > limit:  # the batch ran to a longer limit than this attempt's own
            ids, logprobs, finish = ids[:limit], logprobs[:limit], "length"
        results.append({"prompt_token_ids": prompt_ids, "response_token_ids": ids,
                        "response_logprobs": logprobs, "finish_reason": finish,
                        "response": policy.decode(ids), "started_at": started})
    return results


class Generate(beam.PTransform):
    """Attempts in, attempts with response text, token ids and logprobs out."""

    def __init__(self, handler: PolicyModelHandler):
        super().__init__()
        self.handler = handler

    def expand(self, attempts):
        return (attempts
                | "Sample" >> RunInference(self.handler)
                | "Attach" >> beam.Map(lambda r: r.example.replace(**r.inference)))
