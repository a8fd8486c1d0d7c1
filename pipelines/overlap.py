"""The overlapped loop: iteration k+1 rolls out while iteration k trains, within a staleness bound.

With `[overlap] max_staleness = s` (s >= 1), iteration k samples from checkpoint k-1-s (policy
version k-s) instead of k-1, so its rollout need not wait for the update of iteration k-1: that
update runs meanwhile in a process of its own (trainer/train_job.py; `trainer_processes` > 1
launches it data-parallel, trainer/distributed.py). The lag is fixed, never "whatever checkpoint
is newest": which weights sampled a row then depends on the settings alone, not on timing, so a
run's tables are the same on every machine and after any resume.

The update of iteration k starts from checkpoint k-1 and trains on rows sampled by checkpoint
k-1-s; it admits those rows (and no older ones: StalePolicyError) and corrects for the lag
(trainer/off_policy.py).

The experience buffer is the run directory. An iteration's rollout ends with
iterations/K/_ROLLED_OUT; the trainer lane consumes rolled-out iterations in order; the commit
marker (iterations/K/_COMMITTED) is written by this process once the update's checkpoint is
complete. After a kill -9 anywhere, a resume keeps every rolled-out iteration, trains those not
committed (their half-written checkpoint deleted first), and rolls out the rest again from
scratch: the same tables as an uninterrupted run with the same settings.

Timings land in each commit marker as wall-clock windows (`stages`: rollout, train), which the
HTML report draws as a timeline.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.pipelines.config import RunConfig
from flywheel.pipelines.layout import RunLayout
from flywheel.trainer.train_job import raise_refusal, spec_of

KEEP_ON_RETRY = ("evaluations",)  # an evaluation of a version is its own, made once


@dataclass
class _Job:
    iteration: int
    spec: dict
    rollout: dict                      # the rollout's part of the commit marker
    window: tuple[float, float] = (0.0, 0.0)
    result: dict | None = None
    failure: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the thread that started it ends (Linux
    prctl PR_SET_PDEATHSIG), so a killed driver leaves no update writing a checkpoint."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def trainer_command(spec_path: str, processes: int) -> list[str]:
    """The update's command line: one process, or a torchrun data-parallel launch."""
    if processes <= 1:
        return [sys.executable, "-m", "flywheel.trainer.train_job", spec_path]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={processes}", "-m", "flywheel.trainer.train_job", spec_path]


class TrainerLane:
    """Updates run one at a time, in submission order, on a thread of their own: one long-lived
    `train_job --serve` process for a single-process trainer (no start-up per update), or a
    torchrun launch per update for several ranks. The driver's thread collects them (commits)
    when it needs their checkpoints."""

    def __init__(self, processes: int = 1, workdir: str | None = None):
        self.processes = processes
        self.workdir = workdir or tempfile.mkdtemp(prefix="flywheel-trainer-")
        self.jobs: queue.Queue[_Job | None] = queue.Queue()
        self.pending: list[_Job] = []
        self.server: subprocess.Popen | None = None
        self.server_log = os.path.join(self.workdir, "train-server.log")
        self.thread = threading.Thread(target=self._work, name="trainer-lane", daemon=True)
        self.thread.start()

    def submit(self, iteration: int, spec: dict, rollout: dict) -> None:
        spec = {**spec, "result": os.path.join(self.workdir, f"result-{iteration}.json")}
        job = _Job(iteration, spec, rollout)
        self.pending.append(job)
        self.jobs.put(job)

    def _work(self) -> None:
        while (job := self.jobs.get()) is not None:
            spec_path = os.path.join(self.workdir, f"spec-{job.iteration}.json")
            with open(spec_path, "w") as f:
                json.dump(job.spec, f)
            started = time.time()
            if self.processes <= 1:
                ok, log_path, why = self._serve(spec_path)
            else:
                log_path = os.path.join(self.workdir, f"train-{job.iteration}.log")
                with open(log_path, "wb") as log:
                    code = subprocess.call(trainer_command(spec_path, self.processes), stdout=log,
                                           stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
                ok, why = code == 0, f"exited with {code}"
            job.window = (started, time.time())
            if ok and os.path.exists(job.spec["result"]):
                with open(job.spec["result"]) as f:
                    job.result = json.load(f)
            else:
                with open(log_path, "rb") as f:
                    tail = f.read()[-4000:].decode(errors="replace")
                job.failure = (f"the update of iteration {job.iteration} {why}; its output "
                               f"ends:\n{tail}")
            job.done.set()

    def _serve(self, spec_path: str) -> tuple[bool, str, str]:
        """(ok, log path, why not) of one update by the long-lived trainer process."""
        if self.server is None:
            with open(self.server_log, "ab") as log:
                self.server = subprocess.Popen(
                    [sys.executable, "-m", "flywheel.trainer.train_job", "--serve"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                    preexec_fn=_die_with_parent)
        try:
            self.server.stdin.write(spec_path + "\n")
            self.server.stdin.flush()
            reply = self.server.stdout.readline().strip()
        except OSError:  # the process is gone (BrokenPipe)
            reply = ""
        if reply == f"done {spec_path}":
            return True, self.server_log, ""
        code = self.server.poll()
        return False, self.server_log, (f"failed ({reply})" if reply else
                                        f"ended: the trainer process exited with {code}")

    def collect(self, through: int, block: bool = True) -> list[_Job]:
        """The finished jobs of iterations <= `through`, in order, removed from the pending ones
        (waiting for each when `block`; else only those already done, up to the first that is
        not). A crashed update raises RuntimeError; a refused one its error."""
        out = []
        while self.pending and self.pending[0].iteration <= through:
            job = self.pending[0]
            if not block and not job.done.is_set():
                break
            job.done.wait()
            self.pending.pop(0)
            if job.failure:
                raise RuntimeError(job.failure)
            raise_refusal(job.result)
            out.append(job)
        return out

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=5)
        if self.server is not None:
            try:
                self.server.stdin.close()  # end of input: the server returns
                self.server.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.server.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)  # specs, results and logs of the updates


def update_spec(config: RunConfig, layout: RunLayout, initial: str, k: int,
                reviewed: bool = False) -> dict:
    """train_job's spec for iteration k: from checkpoint k-1, admitting rows of the
    max_staleness checkpoints before it (those that exist: the initial policy stands for the
    ones before the first); `reviewed` (people's labels join the update, sampled up to
    review.max_wait iterations earlier): max_staleness + max_wait of them."""
    from flywheel.pipelines.driver import checkpoint_after
    start = checkpoint_after(layout, initial, k - 1)
    older = []
    lag = config.overlap.max_staleness + (config.review.max_wait if reviewed else 0)
    for v in range(k - 2, k - 2 - lag, -1):
        uri = checkpoint_after(layout, initial, v)
        if uri != start and uri not in older:
            older.append(uri)
    return spec_of(layout.table_dir("trajectories", k), start, layout.checkpoint(k), config.train,
                   seed=config.seed * 1_000_003 + k, result="", reference_checkpoint_uri=initial,
                   algorithm=config.algorithm, older_checkpoint_uris=older,
                   sharding=config.overlap.trainer_sharding)


def run_overlapped(config: RunConfig, layout: RunLayout, info: dict, initial: str, first: int,
                   options: PipelineOptions | None, event) -> None:
    """Iterations first..config.iterations-1, rollout k+1 beside update k (see the module doc)."""
    from flywheel.pipelines.driver import checkpoint_after, commit, evaluate_policy, roll_out
    from flywheel.pipelines.review_rewards import review_before_update
    s, lane = config.overlap.max_staleness, TrainerLane(config.overlap.trainer_processes)
    every = config.evaluation.every

    def committed(jobs) -> None:
        for job in jobs:
            commit(layout, info, job.iteration, job.rollout, job.result["stats"], job.window,
                   event)

    def evaluate_due() -> None:
        """--eval-every: each version v % every == 0 (v < iterations: the last is the driver's)
        whose checkpoint v-1 is committed by now, once. Called after a rollout, never before
        one: a rollout's retry deletes its iteration's metrics, evaluations' rows among them."""
        if not every:
            return
        newest = max(layout.committed_iterations(), default=-1) + 1
        for v in range(0, min(newest, config.iterations - 1) + 1, every):
            if not layout.exists(layout.table_dir("evaluations", v)):
                evaluate_policy(config, layout, info, v,
                                checkpoint_after(layout, initial, v - 1), options, event)

    try:
        for k in range(first, config.iterations):
            committed(lane.collect(k - 1 - s))                  # the checkpoint k samples from
            if layout.exists(layout.rollout_marker(k)):          # rolled out before a kill
                rollout = layout.read_json(layout.rollout_marker(k))
                layout.delete_update(k)
            else:
                layout.delete_iteration(k, keep=KEEP_ON_RETRY)   # a killed rollout's leftovers
                rollout = roll_out(config, layout, info, k, initial, options, event)
                reviewed = review_before_update(layout, info["run_id"], k, config.review,
                                                config.algorithm, config.seed, event)
                rollout = {**rollout, "reviewed_rows": reviewed["rows"]}  # people's labels
                layout.write_json(layout.rollout_marker(k), rollout)
            committed(lane.collect(k - 1, block=False))
            event("train_begin", {"iteration": k})
            lane.submit(k, update_spec(config, layout, initial, k,
                                       reviewed=bool(rollout.get("reviewed_rows"))), rollout)
            evaluate_due()
        committed(lane.collect(config.iterations - 1))
        evaluate_due()
    finally:
        lane.close()
