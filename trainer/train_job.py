"""One trainer iteration as a process of its own: `python -m flywheel.trainer.train_job SPEC.json`.

The overlapped loop (loop/overlap.py) trains iteration k here while the driver rolls out
k+1: a process, not a thread, so the update's Python work never waits on the rollout's for the
interpreter lock, and so the same entry point serves a data-parallel launch (`torchrun
--nproc-per-node N -m flywheel.trainer.train_job SPEC.json`, trainer/distributed.py).

With `--serve` it stays up for many updates, one SPEC path per line of its stdin, answering
`done PATH` on stdout (the overlapped loop's trainer: no start-up per update), alone or as the
ranks of one launch that serve update after update:

    python -m torch.distributed.run --standalone --nproc-per-node=2 \
        -m flywheel.trainer.train_job --serve

SPEC holds train_iteration's arguments as JSON (cfg and algorithm as their to_dict(); a spec
without `sharding` means "ddp", which one process ignores) and
`result`, the path the job writes {"stats": ...} to, or {"error": type, "message": ...} when the
update refuses its rows (StalePolicyError) or its settings (ValueError): the driver raises the
same error by name. Anything else is a crash: a traceback on stderr and a non-zero exit.
"""
from __future__ import annotations

import json
import os
import queue
import sys
import threading

from flywheel.trainer import distributed
from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.off_policy import StalePolicyError
from flywheel.trainer.train_step import TrainConfig

REFUSALS = {"StalePolicyError": StalePolicyError, "ValueError": ValueError}


def spec_of(trajectories_uri: str, init_checkpoint_uri: str, out_checkpoint_uri: str,
            cfg: TrainConfig, seed: int, result: str, reference_checkpoint_uri: str | None = None,
            algorithm: Algorithm = Algorithm(), older_checkpoint_uris=(),
            sharding: str = "ddp") -> dict:
    """The JSON spec of one train_iteration call (see the module doc)."""
    return {"trajectories_uri": trajectories_uri, "init_checkpoint_uri": init_checkpoint_uri,
            "out_checkpoint_uri": out_checkpoint_uri, "cfg": cfg.to_dict(), "seed": seed,
            "reference_checkpoint_uri": reference_checkpoint_uri,
            "algorithm": algorithm.to_dict(), "older_checkpoint_uris": list(older_checkpoint_uris),
            "sharding": sharding, "result": result}


def run(spec: dict) -> dict:
    """Run the spec's update; returns what the result file holds."""
    from flywheel.trainer.train import train_iteration
    cfg = dict(spec["cfg"])
    cfg["betas"] = tuple(cfg["betas"])
    try:
        stats = train_iteration(spec["trajectories_uri"], spec["init_checkpoint_uri"],
                                spec["out_checkpoint_uri"], TrainConfig(**cfg), seed=spec["seed"],
                                reference_checkpoint_uri=spec["reference_checkpoint_uri"],
                                algorithm=Algorithm(**spec["algorithm"]),
                                older_checkpoint_uris=spec["older_checkpoint_uris"],
                                sharding=spec.get("sharding", "ddp"))
    except (StalePolicyError, ValueError) as e:
        return {"error": type(e).__name__ if type(e).__name__ in REFUSALS else "ValueError",
                "message": str(e)}
    return {"stats": stats}


def raise_refusal(result: dict) -> None:
    """Raise the error a result file reports, as the class the job caught."""
    if "error" in result:
        raise REFUSALS.get(result["error"], ValueError)(result["message"])


def write_result(spec: dict, out: dict) -> None:
    """The result file, written whole (a temporary file renamed)."""
    tmp = spec["result"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f)
    os.replace(tmp, spec["result"])


def serve(lines, reply) -> int:
    """`--serve`: one process (or one launch of ranks) for many updates, so each does not pay
    for starting Python and torch again (seconds, against a tiny policy's update of a few).
    Each input line is a SPEC path; the update runs and `done PATH` is replied once its result
    file is written. Each update builds everything it uses from its spec, as a fresh process
    would. A crash is a traceback on stderr and `failed PATH`; the caller ends the run.

    Under a torchrun launch (WORLD_SIZE > 1) every rank inherits the launcher's stdin and
    stdout: rank 0 alone reads the lines and replies, and broadcasts each path to the others
    (`_broadcast`); a crash on any rank exits it non-zero, so torchrun ends the other ranks and
    exits non-zero too. The end of input ends every rank, each leaving the process group."""
    import traceback
    rank = 0
    commands = (line.strip() for line in lines if line.strip())
    if distributed.launched():
        rank, _ = distributed.start()
        commands = _broadcast(lines if rank == 0 else None)
    for path in commands:
        try:
            _update(path, rank)
        except BaseException:  # noqa: BLE001  reported, then the caller stops
            traceback.print_exc()
            if rank == 0:
                reply(f"failed {path}")
            return 1
        if rank == 0:
            reply(f"done {path}")
    distributed.finish()
    return 0


def _update(path: str, rank: int) -> None:
    """One update of `serve`: its spec read from `path`, its result written by rank 0."""
    import contextlib
    with open(path) as f:
        spec = json.load(f)
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the replies alone
        out = run(spec)
    if rank == 0:
        write_result(spec, out)


def _broadcast(lines):
    """Rank 0's non-blank `lines` (stripped; None on the other ranks), on every rank of the
    launch, until rank 0's end of input. A rank waits for the next line in a broadcast, which
    fails after the process group's timeout (trainer/distributed.py: timeout); the wait between
    updates can be longer (a rollout), so while no line comes rank 0 broadcasts an empty one
    (passed over) every quarter of that timeout."""
    every = distributed.timeout().total_seconds() / 4
    waiting = _queued(lines) if lines is not None else None
    while True:
        try:
            line = waiting.get(timeout=every) if waiting else None
        except queue.Empty:
            line = ""
        line = distributed.broadcast_object(line)
        if line is None:
            return
        if line:
            yield line


def _queued(lines) -> queue.Queue:
    """A queue that a daemon thread fills with the non-blank `lines` (stripped), then None: so
    rank 0 can wait for a line with a time limit."""
    waiting: queue.Queue = queue.Queue()

    def fill() -> None:
        for line in lines:
            if line.strip():
                waiting.put(line.strip())
        waiting.put(None)

    threading.Thread(target=fill, name="train-job-input", daemon=True).start()
    return waiting


def main(argv: list[str]) -> int:
    if distributed.launched():
        distributed.die_with_launcher()  # else a SIGKILLed torchrun leaves this rank running
    if argv == ["--serve"]:
        return serve(sys.stdin, lambda text: print(text, flush=True))
    if len(argv) != 1:
        print("usage: python -m flywheel.trainer.train_job SPEC.json | --serve", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        spec = json.load(f)
    ended = False
    try:
        out = run(spec)
        ended = True
    finally:  # a data-parallel launch's process group (train_iteration joins it)
        distributed.finish(together=ended)
    if int(os.environ.get("RANK", "0")) == 0:  # one writer under a data-parallel launch
        write_result(spec, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
