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

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.settings.config import RunConfig
from flywheel.loop.iteration import (checkpoint_after, commit, evaluate_policy, roll_out,
                                     update_checkpoints)
from flywheel.settings.layout import RunLayout
from flywheel.feedback.review_rewards import review_before_update
from flywheel.trainer.distributed import die_with_launcher
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


def trainer_command(spec_path: str, processes: int) -> list[str]:
    """The update's command line: one process, or a torchrun data-parallel launch; with
    "--serve" for `spec_path`, the long-lived trainer that TrainerLane feeds (its ranks serve
    update after update)."""
    if processes <= 1:
        return [sys.executable, "-m", "flywheel.trainer.train_job", spec_path]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={processes}", "-m", "flywheel.trainer.train_job", spec_path]


class TrainerLane:
    """Updates run one at a time, in submission order, on a thread of their own, by one
    long-lived `train_job --serve`: a process, or a torchrun launch whose ranks stay up (no
    start-up per update). The driver's thread collects them (commits) when it needs their
    checkpoints."""

    def __init__(self, processes: int = 1, workdir: str | None = None):
        self.processes = processes
        self.workdir = workdir or tempfile.mkdtemp(prefix="flywheel-trainer-")
        os.makedirs(self.workdir, exist_ok=True)
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
            try:
                self._run(job)
            except Exception as e:  # noqa: BLE001  the driver raises it: a waiting collect never hangs
                job.failure = (f"the update of iteration {job.iteration} could not run: "
                               f"{type(e).__name__}: {e}")
            job.done.set()
        self._end_server()  # on this thread: the server dies with it (die_with_launcher)

    def _run(self, job: _Job) -> None:
        """One update by the server: its result, or its failure with the log's tail."""
        spec_path = os.path.join(self.workdir, f"spec-{job.iteration}.json")
        with open(spec_path, "w") as f:
            json.dump(job.spec, f)
        started = time.time()
        ok, why = self._serve(spec_path)
        job.window = (started, time.time())
        if ok and os.path.exists(job.spec["result"]):
            with open(job.spec["result"]) as f:
                job.result = json.load(f)
        else:
            with open(self.server_log, "rb") as f:
                tail = f.read()[-4000:].decode(errors="replace")
            job.failure = (f"the update of iteration {job.iteration} {why}; its output "
                           f"ends:\n{tail}")

    def _serve(self, spec_path: str) -> tuple[bool, str]:
        """(ok, why not) of one update by the long-lived trainer."""
        if self.server is None:
            with open(self.server_log, "ab") as log:
                self.server = subprocess.Popen(
                    trainer_command("--serve", self.processes), stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=log, text=True, preexec_fn=die_with_launcher)
        try:
            self.server.stdin.write(spec_path + "\n")
            self.server.stdin.flush()
            reply = self._reply()
        except OSError:  # the process is gone (BrokenPipe)
            reply = ""
        if reply == f"done {spec_path}":
            return True, ""
        if reply:
            return False, f"failed ({reply})"
        try:
            code = self.server.wait(timeout=30)  # torchrun ends its other ranks first
        except subprocess.TimeoutExpired:
            code = None
        return False, f"ended: the trainer process exited with {code}"

    def _reply(self) -> str:
        """The server's next reply, "" once its stdout ends. Under torchrun, every rank writes
        to that stdout: a line that is no reply (a library's print) is passed over."""
        while line := self.server.stdout.readline():
            if line.startswith(("done ", "failed ")):
                return line.strip()
        return ""

    def _end_server(self) -> None:
        """End of input: the server (every rank) returns; killed if it has not in 30 s."""
        if self.server is None:
            return
        try:
            self.server.stdin.close()
            self.server.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self._kill_server()

    def _kill_server(self) -> None:
        """SIGKILL the server if it runs; torchrun's ranks die with it (die_with_launcher)."""
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait()

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
        """Ends the server: cleanly (end of input, on the lane's thread) when no update is in
        flight, else killed at once as before (the driver has stopped; a resume redoes the
        update), every rank with it; killed too if it has not ended within 40 s."""
        self.jobs.put(None)
        if any(not job.done.is_set() for job in self.pending):
            self._kill_server()
        self.thread.join(timeout=40)
        self._kill_server()
        shutil.rmtree(self.workdir, ignore_errors=True)  # specs, results and logs of the updates


def update_spec(config: RunConfig, layout: RunLayout, initial: str, k: int,
                reviewed: bool = False) -> dict:
    """train_job's spec for iteration k: from checkpoint k-1, admitting rows of the
    max_staleness checkpoints before it (those that exist: the initial policy stands for the
    ones before the first); `reviewed` (people's labels join the update, sampled up to
    review.max_wait iterations earlier): max_staleness + max_wait of them
    (iteration.py update_checkpoints)."""
    start, older = update_checkpoints(config, layout, initial, k, reviewed)
    return spec_of(layout.table_dir("trajectories", k), start, layout.checkpoint(k), config.train,
                   seed=config.seed * 1_000_003 + k, result="", reference_checkpoint_uri=initial,
                   algorithm=config.algorithm, older_checkpoint_uris=older,
                   sharding=config.overlap.trainer_sharding)


def run_overlapped(config: RunConfig, layout: RunLayout, info: dict, initial: str, first: int,
                   options: PipelineOptions | None, event) -> None:
    """Iterations first..config.iterations-1, rollout k+1 beside update k (see the module doc)."""
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
