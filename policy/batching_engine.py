"""One rollout engine per worker process, shared by every episode loop on it: dynamic batching.

    batcher = BatchingEngine(engine, lock)          # transforms/policy_model.py: WorkerModel.batching()
    with batcher.client() as client:                # one per episode loop (a live loop)
        samples = client.sample(prompts, temperatures, seeds, max_new_tokens)
        client.digest, client.queue_ms, client.sample_ms
    batcher.take_stats()                            # engine batch sizes since the last call

Episode loops run as threads (transforms/episode_loop.py); each asks for its next action and
waits. One generation thread gathers the requests pending at that moment, waiting at most
`max_wait_s` for more (or not at all once every live loop is waiting), and calls the engine's
`sample` once per max_new_tokens among them, up to `max_batch` rows: the dynamic batching of
SkyRL's and verl's agent loops, so a loop blocked on a slow tool call holds back only itself.

Rows do not depend on how requests meet: every engine promises that row i depends only on its
own prompt, temperature and seed (policy/rollout_engine.py), and each request carries its own
seed (transforms/turn.py `turn_seed`: attempt seed and turn). On CPU the tiny and hf samplers
are bit-identical row by row whatever the batch; on a GPU kernels may pick other reduction
orders for other batch shapes, so a log-probability may differ in its last bits (docs/ARCHITECTURE.md, "One iteration").

The engine is not thread-safe: only this thread samples, under the worker's `lock` (the one its
weight loads take), and each result names the digest of the weights that drew it.

An engine with a step loop of its own (vLLM: `enqueue`, `step`, `abort`, `in_flight`;
policy/backends/hf/vllm_engine.py) is driven step by step instead (`continuous`): a request joins
the running engine at its next step, while the others generate, rather than waiting for a whole
batch to finish (bench/vllm_continuous.py: about 2x sooner for episodes with tool calls between
turns); each step takes the lock, and `engine_batch_size` then counts the requests running in
each step. The engine's own
counters (vLLM's prompt tokens and prefix-cache hits) come out through `take_counters`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flywheel.policy.policy import Sample
    from flywheel.policy.rollout_engine import RolloutEngine

MAX_WAIT_S = 0.005  # how long a request may wait for others to join its batch


@dataclass
class _Request:
    prompt: Sequence[int]
    temperature: float
    seed: int
    max_new_tokens: int
    client: EngineClient | None
    submitted: float = field(default_factory=time.monotonic)
    future: Future = field(default_factory=Future)  # (Sample, digest, queue seconds)


class BatchingEngine:
    """`engine` behind one generation thread that batches whatever requests are pending."""

    def __init__(self, engine: RolloutEngine, lock: threading.Lock | None = None,
                 max_wait_s: float = MAX_WAIT_S, max_batch: int = 256,
                 continuous: bool | None = None):
        """`continuous`: drive the engine's own step loop (None: whenever it has one)."""
        self.engine, self.lock = engine, lock or threading.Lock()
        self.max_wait_s, self.max_batch = max_wait_s, max(1, max_batch)
        stepping = hasattr(engine, "enqueue") and hasattr(engine, "step")
        if continuous and not stepping:
            raise ValueError(f"{type(engine).__name__} has no step loop (enqueue, step)")
        self.continuous = stepping if continuous is None else continuous
        self._cond = threading.Condition()
        self._pending: list[_Request] = []
        self._live = 0  # registered clients (episode loops) not yet closed
        self._sizes: list[int] = []  # rows of each engine call, until take_stats
        self._thread: threading.Thread | None = None
        self._closed = False
        self.calls = 0    # engine calls (sample calls; steps of a step loop) so far
        self.running = 0  # rows in the engine call now (or waiting for its lock)

    def client(self) -> EngineClient:
        """A live loop's handle: while it is open, a batch waits for it (up to max_wait_s)."""
        with self._cond:
            self._live += 1
        return EngineClient(self, live=True)

    def sample(self, prompts, temperatures, seeds, max_new_tokens) -> list[Sample]:
        """The RolloutEngine call, for a caller that is no live loop (a single-turn batch)."""
        return EngineClient(self, live=False).sample(prompts, temperatures, seeds, max_new_tokens)

    @property
    def digest(self) -> str | None:
        return self.engine.digest

    @property
    def pending(self) -> int:
        """Rows waiting for an engine call."""
        with self._cond:
            return len(self._pending)

    def take_stats(self) -> list[int]:
        """The rows of each engine call since the last take."""
        with self._cond:
            sizes, self._sizes = self._sizes, []
        return sizes

    def take_counters(self) -> dict[str, int]:
        """The engine's own counters since the last take (vLLM: `vllm_prompt_tokens`,
        `vllm_prompt_tokens_cached`); none for engines without them."""
        take = getattr(self.engine, "take_counters", None)
        return take() if take is not None else {}

    def close(self) -> None:
        """Stop the generation thread; requests still pending fail."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    def _leave(self) -> None:
        with self._cond:
            self._live -= 1
            self._cond.notify_all()

    def _submit(self, requests: list[_Request]) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError("the batching engine is closed")
            self._pending += requests
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._step_loop if self.continuous else self._generate,
                    name="batching-engine", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _gather(self) -> list[_Request] | None:
        """The next batch: what is pending once every live loop waits or max_wait_s passed
        since the oldest request; None once closed."""
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            if self._closed:
                for r in self._pending:
                    r.future.set_exception(RuntimeError("the batching engine closed"))
                self._pending = []
                return None
            deadline = self._pending[0].submitted + self.max_wait_s
            while len({id(r.client) for r in self._pending if r.client is not None}) < self._live:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    break
                self._cond.wait(left)
            group = self._pending[0].max_new_tokens
            batch = [r for r in self._pending if r.max_new_tokens == group][:self.max_batch]
            taken = {id(r) for r in batch}
            self._pending = [r for r in self._pending if id(r) not in taken]
            self._sizes.append(len(batch))
            return batch

    def _generate(self) -> None:
        while (batch := self._gather()) is not None:
            started = time.monotonic()
            self.running = len(batch)
            try:
                with self.lock:
                    samples = self.engine.sample([r.prompt for r in batch],
                                                 [r.temperature for r in batch],
                                                 [r.seed for r in batch], batch[0].max_new_tokens)
                    digest = self.engine.digest
            except BaseException as e:  # noqa: BLE001  each waiting loop raises it (its bundle fails)
                for r in batch:
                    r.future.set_exception(e)
                continue
            finally:
                self.running, self.calls = 0, self.calls + 1
            for r, s in zip(batch, samples):
                r.future.set_result((s, digest, started - r.submitted))

    def _step_loop(self) -> None:
        """Continuous batching: add what is pending to the engine, run one step, hand out what
        finished; repeat while anything runs or waits."""
        running: dict[str, tuple[_Request, str | None, float]] = {}  # id: request, digest, queued
        while True:
            with self._cond:
                while not self._pending and not running and not self._closed:
                    self._cond.wait()
                new, self._pending = self._pending, []
                closed = self._closed
            if closed:
                with contextlib.suppress(Exception):
                    self.engine.abort(list(running))
                for r in new + [r for r, _, _ in running.values()]:
                    r.future.set_exception(RuntimeError("the batching engine closed"))
                return
            try:
                with self.lock:
                    for group in sorted({r.max_new_tokens for r in new}):
                        rows = [r for r in new if r.max_new_tokens == group]
                        ids = self.engine.enqueue([r.prompt for r in rows],
                                                  [r.temperature for r in rows],
                                                  [r.seed for r in rows], group)
                        now, digest = time.monotonic(), self.engine.digest
                        running.update({i: (r, digest, now - r.submitted) for i, r in zip(ids, rows)})
                    with self._cond:
                        self._sizes.append(len(running))
                    self.running = len(running)
                    finished = self.engine.step()
                    self.calls += 1
                    if running and not finished and not self.engine.in_flight:
                        raise RuntimeError(f"the engine lost {len(running)} running requests")
            except BaseException as e:  # noqa: BLE001  each waiting loop raises it (its bundle fails)
                with contextlib.suppress(Exception):
                    self.engine.abort(list(running))
                failed = {id(r): r for r in new} | {id(r): r for r, _, _ in running.values()}
                for r in failed.values():
                    r.future.set_exception(e)
                running = {}
                continue
            for i, s in finished:
                r, digest, queued = running.pop(i)
                r.future.set_result((s, digest, queued))
            self.running = len(running)


class EngineClient:
    """What one caller samples through: the RolloutEngine's `sample`, and what its calls cost."""

    def __init__(self, batcher: BatchingEngine, live: bool):
        self.batcher, self.live = batcher, live
        self.digest: str | None = None  # the weights that drew this client's last sample
        self.queue_ms = 0.0  # waiting for a batch to start, summed over calls
        self.sample_ms = 0.0  # from asking to having the samples (queue wait included)

    def sample(self, prompts, temperatures, seeds, max_new_tokens) -> list[Sample]:
        asked = time.monotonic()
        requests = [_Request(list(p), float(t), int(s), int(max_new_tokens), self if self.live else None)
                    for p, t, s in zip(prompts, temperatures, seeds)]
        if not requests:
            return []
        self.batcher._submit(requests)
        results = [r.future.result() for r in requests]
        self.queue_ms += 1000 * max(q for _, _, q in results)
        self.sample_ms += 1000 * (time.monotonic() - asked)
        self.digest = results[-1][1]
        return [s for s, _, _ in results]

    def close(self) -> None:
        if self.live:
            self.live = False
            self.batcher._leave()

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
