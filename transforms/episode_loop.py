"""RunEpisodes: one Beam stage runs whole episodes, each its own loop, none waiting for another.

    live episodes -> Batch -> RunEpisodes: per episode, on a thread of its own (episode.concurrency
    per worker process):  next action (the worker's batching engine) -> act (the sandbox) -> ...
    -> end -> score (its answer run once, as Execute runs a single-turn attempt's)
    -> ended, executed episodes (the moment each is scored) | errors

Each loop asks the worker's one engine for its next action (`generate_turn_batch` on a batch of
one, so context strategies, summaries and token accounting are the turn sampler's own) and waits;
the engine's generation thread batches whatever requests are pending then
(policy/batching_engine.py). The loop then takes the action through the domain's step and the tool
runner (`act`), and repeats until the episode ends. It then ends the episode (`end_episode`) and
runs its answer in the sandbox on the same thread (`execute_batch`, what the Execute stage does for
a single-turn attempt), so an early episode's scoring run overlaps its siblings' turns instead of
waiting for the last of them in a stage after this one. An episode that ends is emitted from
`process` at once (concurrent.futures.as_completed; never from finish_bundle, whose output some
runners drop), so a slow sibling holds back only itself. The graph is the same for 2 turns or 200.

What the loops spend is counted per episode (namespace flywheel): the distributions
`episode_generation_ms` (asking for actions, queue wait included), `episode_tool_ms`,
`episode_queue_wait_ms` and `engine_batch_size` (rows per engine call), and as counters for the
run log `episode_generation_ms_total`, `episode_tool_ms_total`, `episode_queue_wait_ms_total`,
`episodes_run`, `engine_batches`, `engine_batch_rows`.

Beam's metrics belong to the thread running the DoFn (its state tracker is thread-local), so a loop
thread borrows the DoFn's current state for the counters its steps increment (`tool_calls`,
`errors_*`, ...), which otherwise would be dropped.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import apache_beam as beam
from apache_beam.runners.worker import statesampler

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.domains.tool_runner import BACKOFF_S, RETRIES, ToolRunner
from flywheel.records.attempt import Attempt
from flywheel.sandbox import shared_pool
from flywheel.transforms.episode_journal import EpisodeJournal, episode_key
from flywheel.transforms.errors import ERRORS_TAG, count, errors_output
from flywheel.transforms.execute import execute_batch, report_usage
from flywheel.transforms.turn import act, end_episode, generate_turn_batch, with_sample

if TYPE_CHECKING:
    from flywheel.policy.batching_engine import EngineClient
    from flywheel.policy.policy import Policy
    from flywheel.transforms.policy_model import PolicyModelHandler

_log = logging.getLogger(__name__)


@dataclass
class EpisodeRun:
    """An episode as its loop left it (ended), its errors rows and what its turns spent."""
    attempt: Attempt
    errors: list[dict] = field(default_factory=list)
    generation_ms: float = 0.0
    tool_ms: float = 0.0
    queue_ms: float = 0.0
    score_ms: float = 0.0
    seconds: float = 0.0


def run_episode(attempt: Attempt, client: EngineClient, runner: ToolRunner,
                settings: EpisodeSettings, policy: Policy) -> EpisodeRun:
    """Run one started episode to its end: sample the next action through `client`, take it
    with `runner`, until `episode.end` is set; then end it and run its answer (scored)."""
    run, began = EpisodeRun(attempt), time.perf_counter()
    while not run.attempt.episode.end:
        asked = time.perf_counter()
        fields = generate_turn_batch(policy, [run.attempt], client, settings)[0]
        sampled = time.perf_counter()
        attempt = with_sample(run.attempt, {**fields, "checkpoint_digest": client.digest})
        attempt, error = act(attempt, runner, settings)
        run.generation_ms += 1000 * (sampled - asked)
        run.tool_ms += 1000 * (time.perf_counter() - sampled)
        run.attempt = attempt
        if error is not None:
            run.errors.append(error)
    run.queue_ms = client.queue_ms
    scored = time.perf_counter()
    (run.attempt,), errors = execute_batch([end_episode(run.attempt)], runner, _IN_PLACE)
    run.errors += errors
    run.score_ms = 1000 * (time.perf_counter() - scored)
    run.seconds = time.perf_counter() - began
    return run


class _InPlace:
    """execute_batch's pool for one attempt: run it on the calling thread."""
    map = staticmethod(map)


_IN_PLACE = _InPlace()


class _Borrowed:
    """A loop thread's state tracker: the DoFn thread's current state (its metrics container)."""

    def __init__(self, state):
        self.state = state

    def current_state(self):
        return self.state

    def update_metric(self, typed_metric_name, value):  # as Beam's state samplers do
        container = self.state.metrics_container
        if container is not None:
            container.get_metric_cell(typed_metric_name).update(value)


class _RunEpisodes(beam.DoFn):
    """The worker's model and batching engine, its shared sandbox pool, a tool runner and
    `settings.concurrency` loop threads, opened in setup. With a `journal` folder, every ended
    episode is written there as it ends, and an episode already there (a resumed run), sampled by
    the same weights, is taken as it is (transforms/episode_journal.py)."""

    def __init__(self, handler: PolicyModelHandler, settings: EpisodeSettings, backend: str,
                 options: dict | None = None, retries: int = RETRIES, backoff_s: float = BACKOFF_S,
                 journal: str | None = None):
        self.handler, self.settings = handler, settings
        self.backend_name, self.options = backend, dict(options or {})
        self.retries, self.backoff_s = retries, backoff_s
        self.journal_folder = journal

    def setup(self):
        self.model = self.handler.load_model()
        self.backend = shared_pool.acquire(self.backend_name, self.options)
        self.runner = ToolRunner(self.backend, self.retries, self.backoff_s)
        self.threads = ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="episode")
        self.journal = EpisodeJournal(self.journal_folder) if self.journal_folder else None

    def process(self, batch):
        policy, digest, _ = self.model.ready(self.handler)
        batcher = self.model.batching(self.handler.max_batch_size)
        tracker = statesampler.get_current_tracker()
        state = tracker.current_state() if tracker is not None else None
        futures = []
        journaled = self.journal.keys() if self.journal is not None and digest is not None else set()
        for attempt in batch:
            kept = self._kept(attempt, digest, journaled)
            if kept is not None:  # ended in an earlier, killed run of this iteration
                count("episodes_resumed")
                yield from (errors_output(error) for error in kept.errors)
                yield kept.attempt
            else:
                futures.append(self.threads.submit(self._loop, attempt, batcher, policy, state))
        for future in as_completed(futures):
            run = future.result()
            self._write(run, digest)
            for error in run.errors:
                yield errors_output(error)
            _count_episode(run)
            _count_batches(batcher.take_stats())
            for name, n in batcher.take_counters().items():  # the engine's own (vLLM prefix cache)
                count(name, n)
            yield run.attempt
        report_usage()

    def _kept(self, attempt, digest, journaled: set[str]):
        key = episode_key(attempt)
        if key not in journaled:  # a fresh run's every episode: no read
            return None
        entry = self.journal.read(key)
        return entry if entry is not None and entry.header.get("digest") == digest else None

    def _write(self, run: EpisodeRun, digest) -> None:
        if self.journal is None:
            return
        try:
            self.journal.write(run.attempt, run.errors, digest, run.seconds)
            count("episodes_journaled")
        except Exception as e:  # noqa: BLE001 - the journal is a safety net, never a failure
            count("episode_journal_errors")
            _log.warning("could not journal episode %s/%s: %s", run.attempt.task_id,
                         run.attempt.sample_index, e)

    def _loop(self, attempt, batcher, policy, state) -> EpisodeRun:
        statesampler.set_current_tracker(_Borrowed(state) if state is not None else None)
        try:
            with batcher.client() as client:
                return run_episode(attempt, client, self.runner, self.settings, policy)
        finally:
            statesampler.set_current_tracker(None)

    def teardown(self):
        self.threads.shutdown(wait=True)
        report_usage()
        shared_pool.release(self.backend)


def _count_episode(run: EpisodeRun) -> None:
    for name, ms in (("generation", run.generation_ms), ("tool", run.tool_ms),
                     ("queue_wait", run.queue_ms), ("score", run.score_ms)):
        beam.metrics.Metrics.distribution("flywheel", f"episode_{name}_ms").update(int(round(ms)))
        count(f"episode_{name}_ms_total", int(round(ms)))
    count("episodes_run")


def _count_batches(sizes: list[int]) -> None:
    if not sizes:
        return
    batch_size = beam.metrics.Metrics.distribution("flywheel", "engine_batch_size")
    for size in sizes:
        batch_size.update(size)
    count("engine_batches", len(sizes))
    count("engine_batch_rows", sum(sizes))


class RunEpisodes(beam.PTransform):
    """Started episodes in; {"attempts": ended, executed episodes, "errors": rows} out. `journal`: the
    folder each ended episode is written to as it ends (None: none)."""

    def __init__(self, handler: PolicyModelHandler, settings: EpisodeSettings, backend: str,
                 options: dict | None = None, journal: str | None = None):
        super().__init__()
        self.handler, self.settings = handler, settings
        self.backend, self.options = backend, dict(options or {})
        self.journal = journal

    def expand(self, episodes):
        # A batch gives the loops of one process() call; it needs no more than the loops that
        # run at once to keep them busy, and a few times that keeps them busy as some end.
        size = self.settings.concurrency
        ran = (episodes
               | "Batch" >> beam.BatchElements(min_batch_size=size, max_batch_size=4 * size)
               | "Run" >> beam.ParDo(_RunEpisodes(self.handler, self.settings, self.backend,
                                                  self.options, journal=self.journal))
               .with_outputs(ERRORS_TAG, main="attempts"))
        return {"attempts": ran.attempts, ERRORS_TAG: ran[ERRORS_TAG]}
