"""Generate: the policy samples each attempt's response through Beam RunInference.

PolicyModelHandler loads the policy once per worker (from a checkpoint URI, whose config.json
names its backend, or created fresh from the run's backend, options and seed) and samples a batch
of attempts together. Each attempt's tokens depend only on its own seed, so results do not depend
on how Beam batched the elements. Only the Policy protocol is used here: any backend fits.
Each attempt records the digest of the weights the worker actually loaded (`checkpoint_digest`),
so the trainer can refuse rows sampled from any other policy than the one it starts from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import apache_beam as beam
from apache_beam.ml.inference.base import ModelHandler, PredictionResult, RunInference

from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import count, now

if TYPE_CHECKING:  # torch loads in load_model, on the worker, not where the pipeline is built
    from flywheel.trainer.policy import Policy


def fit_prompt(ids: list[int], limit: int) -> list[int]:
    """Keep the first token (BOS) and the last tokens of a prompt longer than `limit` (the end
    holds the question).

    The trajectory row stores the ids the policy actually saw, so training stays consistent.
    """
    if len(ids) <= limit:
        return ids
    count("prompts_truncated")
    return ids[:1] + ids[len(ids) - (limit - 1):]


def generate_batch(policy: Policy, batch: Sequence[Attempt]) -> list[dict]:
    """Sample one response per attempt: the Attempt fields of its token ids, logprobs, finish
    reason and decoded text."""
    started = now()
    max_new = max(a.max_new_tokens for a in batch)
    prompts = [fit_prompt(policy.encode_prompt(a.prompt), policy.context - max_new) for a in batch]
    samples = policy.sample(prompts, [a.sampling_temperature for a in batch],
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


@dataclass(frozen=True)
class LoadedPolicy:
    """What a worker holds: the policy and the digest of its weights (the model RunInference
    shares between threads, so the digest travels with the weights it names)."""
    policy: Policy
    digest: str


class PolicyModelHandler(ModelHandler[Attempt, PredictionResult, LoadedPolicy]):
    """RunInference handler for any policy backend.

    With `checkpoint_uri` the checkpoint decides the backend; without one, a fresh policy of
    `backend` is created from `options` and `init_seed` (an iteration before any checkpoint).
    """

    def __init__(self, checkpoint_uri: str | None, *, backend: str,
                 options: dict | None = None, init_seed: int = 0, max_batch_size: int = 256):
        self.checkpoint_uri = checkpoint_uri
        self.backend = backend
        self.options = options or {}
        self.init_seed = init_seed
        self.max_batch_size = max_batch_size

    def load_model(self) -> LoadedPolicy:
        from flywheel.trainer.checkpoint import load_checkpoint, policy_digest
        from flywheel.trainer.policies import create_policy
        from flywheel.trainer.train_step import pick_device
        device = pick_device()
        if self.checkpoint_uri:
            ckpt = load_checkpoint(self.checkpoint_uri, device=device)  # checks the digest
            policy, digest = ckpt.policy, ckpt.digest
        else:
            policy = create_policy(self.backend, self.options, self.init_seed, device)
            digest = policy_digest(policy)  # what a checkpoint of it would record
        policy.module.eval()  # sampling runs under no_grad; grad mode stays global and untouched
        return LoadedPolicy(policy, digest)

    def run_inference(self, batch: Sequence[Attempt], model: LoadedPolicy,
                      inference_args=None) -> Iterable[PredictionResult]:
        outs = generate_batch(model.policy, batch)
        return [PredictionResult(a, {**out, "checkpoint_digest": model.digest})
                for a, out in zip(batch, outs)]

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
                | "Attach" >> beam.Map(lambda r: r.example.replace(**r.inference)))
