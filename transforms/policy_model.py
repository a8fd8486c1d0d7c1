"""The rollout's one model handler, shared by Generate (RunInference) and RunEpisodes.

    handler = PolicyModelHandler(checkpoint_uri, backend="hf", options={...})
    attempts | Generate(handler);  episodes | RunEpisodes(handler, ...)

A worker process holds one `WorkerModel`: the policy (its tokenizer frames prompts and
observations), one rollout engine (policy/rollout_engine.py) and the one generation thread that
batches every request for it (policy/batching_engine.py: the episode loops' next actions and
Generate's single-turn batches alike), whichever stages run. The handler names the weights it wants (a checkpoint, or a fresh policy from the run's
backend, options and seed); a worker already running that checkpoint's digest loads nothing, so
a run that mixes single- and multi-turn domains loads each iteration's weights once, and a vLLM
engine starts once per worker and takes each iteration's weights in place. Counters:
`engine_starts`, `weight_loads` (namespace flywheel).

Beam's `Shared` keeps an object alive only until another stage acquires its own (RunInference's
per-stage handles do), so the worker's model lives in this module for the life of the process,
as Beam's vLLM handler keeps its server per worker; `close_worker_model` stops its engine.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import count
from flywheel.transforms.generate import generate_batch

if TYPE_CHECKING:
    from flywheel.policy.batching_engine import BatchingEngine
    from flywheel.policy.checkpoint import Checkpoint
    from flywheel.policy.policy import Policy
    from flywheel.policy.rollout_engine import RolloutEngine


class WorkerModel:
    """A worker's policy and rollout engine, and which handler's weights they hold."""

    def __init__(self):
        self.lock = threading.Lock()
        self.source: tuple | None = None  # the weights asked for (PolicyModelHandler.source)
        self.policy: Policy | None = None
        self.digest: str | None = None
        self.engine: RolloutEngine | None = None
        self.engine_name: str | None = None
        self._batcher: BatchingEngine | None = None

    def ready(self, handler: PolicyModelHandler) -> tuple[Policy, str, RolloutEngine]:
        """(policy, digest, engine) running the weights `handler` names, loading them only
        when the engine runs another digest."""
        with self.lock:
            if self.source != handler.source:
                self._load(handler)
                self.source = handler.source
            return self.policy, self.digest, self.engine

    def batching(self, max_batch: int = 256) -> BatchingEngine:
        """The engine behind this worker's one generation thread (started on first use; a new
        one when the engine was replaced). Sampling takes `lock`, as weight loads do."""
        from flywheel.policy.batching_engine import BatchingEngine
        with self.lock:
            if self._batcher is None or self._batcher.engine is not self.engine:
                if self._batcher is not None:
                    self._batcher.close()
                self._batcher = BatchingEngine(self.engine, self.lock, max_batch=max_batch)
            return self._batcher

    def _load(self, handler: PolicyModelHandler) -> None:
        from flywheel.policy.checkpoint import recorded_digest
        from flywheel.policy.rollout_engine import create_engine
        if handler.checkpoint_uri and self.engine is not None \
                and recorded_digest(handler.checkpoint_uri) == self.engine.digest:
            return  # the weights running are the checkpoint's: nothing to load
        checkpoint = handler.load_checkpoint()
        name = checkpoint.policy.engine
        if self.engine is None or self.engine_name != name:
            self.close()
            self.engine, self.engine_name = create_engine(name), name
            started, loaded = 0, 0
        else:
            started, loaded = self.engine.starts, self.engine.weight_loads
        self.engine.update_weights(checkpoint)
        count("engine_starts", self.engine.starts - started)
        count("weight_loads", self.engine.weight_loads - loaded)
        self.policy, self.digest = checkpoint.policy, checkpoint.digest

    def close(self) -> None:
        """Stop the engine; the next batch loads its weights into a new one."""
        engine, self.engine, self.source = self.engine, None, None
        batcher, self._batcher = self._batcher, None
        if batcher is not None:
            batcher.close()
        if engine is not None:
            engine.close()


_WORKER = WorkerModel()


def close_worker_model() -> None:
    """Stop this process's rollout engine (vLLM's processes, its accelerator memory)."""
    with _WORKER.lock:
        _WORKER.close()


class PolicyModelHandler(ModelHandler[Attempt, PredictionResult, WorkerModel]):
    """RunInference handler for any policy backend and rollout engine: a batch of attempts gets
    one response each, sampled through the worker's batching engine. RunEpisodes opens the same
    worker model (`load_model`, `WorkerModel.ready`) for its episode loops.

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

    @property
    def source(self) -> tuple:
        """What names the weights this handler samples from."""
        if self.checkpoint_uri:
            return (self.checkpoint_uri,)
        return (None, self.backend, repr(sorted(self.options.items())), self.init_seed)

    def load_checkpoint(self) -> Checkpoint:
        """The policy and its weights' digest, on this worker's device."""
        from flywheel.policy.checkpoint import Checkpoint, load_checkpoint, policy_digest
        from flywheel.policy.backends import create_policy
        from flywheel.policy.device import pick_device
        device = pick_device()
        if self.checkpoint_uri:
            checkpoint = load_checkpoint(self.checkpoint_uri, device=device)  # checks the digest
            checkpoint.optimizer_state = None  # sampling never needs it
        else:
            policy = create_policy(self.backend, self.options, self.init_seed, device)
            checkpoint = Checkpoint(policy, None, {}, policy_digest(policy))
        checkpoint.policy.module.eval()  # sampling runs under no_grad; grad mode stays global
        return checkpoint

    def load_model(self) -> WorkerModel:
        return _WORKER  # the weights load on the first batch, where counters count

    def run_inference(self, batch: Sequence[Attempt], model: WorkerModel,
                      inference_args=None) -> Iterable[PredictionResult]:
        policy, digest, _ = model.ready(self)
        if any(a.episode is not None for a in batch):
            raise ValueError("live episodes run in RunEpisodes (transforms/episode_loop.py), "
                             "not through RunInference")
        batcher = model.batching(self.max_batch_size)
        outs = generate_batch(policy, batch, batcher)
        for name, n in batcher.take_counters().items():  # the engine's own (vLLM prefix cache)
            count(name, n)
        return [PredictionResult(a, {**out, "checkpoint_digest": digest})
                for a, out in zip(batch, outs)]

    def validate_inference_args(self, inference_args):
        if inference_args:
            raise ValueError(f"unexpected inference_args {sorted(inference_args)}: none are taken")

    def batch_elements_kwargs(self):
        # BatchElements grows batches from min_batch_size; starting at 1 wastes the first dozens
        # of calls on tiny batches (each sampling call has a fixed cost), so start large.
        return {"min_batch_size": max(1, self.max_batch_size // 4), "max_batch_size": self.max_batch_size}
