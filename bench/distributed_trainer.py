"""One trainer update in 1 process vs 2 data-parallel processes (trainer/distributed.py), side
by side on this machine:

    python bench/distributed_trainer.py --rows 1024 --seed 0 [--sharding fsdp]
        [--policy-options d_model=128 n_layers=4]

Builds a checkpoint of the tiny policy and ROWS real samples of it (Parquet, as the rollout
writes them), then runs the update in 1 process and under torchrun with --nproc-per-node=2,
each --repeats times, alternating, and prints the best of each and their ratio, two ways:
`command`, the whole process as loop/overlap.py launches it (interpreter, torch and
torchrun start-up included), and `update`, train_job.run alone (reading, training, writing the
checkpoint; timed inside the processes between barriers, this file as the worker). Both runs'
weights are compared too (max |difference|). Each process uses FLYWHEEL_TORCH_THREADS=1.
Last, two updates in a row through the overlapped loop's TrainerLane with 2 ranks, whose
torchrun launch stays up (train_job --serve): the first pays the launch, the second not, against
the `command` seconds of a launch per update.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from flywheel.schemas import rows_to_file_table
from flywheel.trainer.algorithm import Algorithm
from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.policy.backends import create_policy
from flywheel.trainer.train_job import spec_of
from flywheel.trainer.train_step import TrainConfig
from flywheel.policy.rollout_engine import engine_for


def sampled_rows(policy, digest: str, n: int, seed: int) -> list[dict]:
    """`n` samples of `policy` on arithmetic prompts, advantages +-1 by parity of the row."""
    prompts = [policy.encode_prompt(f"{(seed + i) % 50}+{i % 7}=") for i in range(n)]
    out = engine_for(policy, local=True).sample(prompts, [1.0] * n, [seed * 100_000 + i for i in range(n)],
                        max_new_tokens=12)
    return [dict(task_id=str(i // 8), prompt_token_ids=p, response_token_ids=s.token_ids,
                 response_logprobs=s.logprobs, advantage=1.0 if i % 2 else -1.0,
                 sampling_temperature=1.0, filtered=False, checkpoint_digest=digest)
            for i, (p, s) in enumerate(zip(prompts, out)) if s.token_ids]


def command(spec_path: str, processes: int, worker: bool = False) -> list[str]:
    """loop/overlap.py's trainer_command (not imported: bench stays off the driver); with
    `worker`, this file's worker in place of train_job."""
    job = [__file__, "--worker", spec_path] if worker else ["-m", "flywheel.trainer.train_job",
                                                            spec_path]
    if processes == 1:
        return [sys.executable, *job]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={processes}", *job]


def worker(spec_path: str) -> None:
    """train_job.run(spec) timed between barriers; rank 0 prints the seconds."""
    from flywheel.trainer import distributed
    from flywheel.trainer.train_job import run
    spec = json.loads(Path(spec_path).read_text())
    rank, _ = distributed.start()
    distributed.barrier()
    started = time.perf_counter()
    run(spec)
    distributed.barrier()
    if rank == 0:
        print(f"update seconds {time.perf_counter() - started:.3f}")
    distributed.finish()


def served(work: Path, specs: list[dict]) -> list[float]:
    """Seconds of each update through one TrainerLane of 2 ranks (a launch kept up)."""
    from flywheel.loop.overlap import TrainerLane
    lane, seconds = TrainerLane(processes=2, workdir=str(work / "lane")), []
    try:
        for k, spec in enumerate(specs, 1):
            started = time.perf_counter()
            lane.submit(k, spec, {})
            lane.collect(k)
            seconds.append(time.perf_counter() - started)
    finally:
        lane.close()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minibatch-size", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--sharding", choices=("ddp", "fsdp"), default="ddp",
                    help="the 2-process run's (trainer/distributed.py)")
    ap.add_argument("--policy-options", nargs="*", default=[], help="KEY=VALUE tiny options")
    ap.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker)
    options = {k: int(v) for k, v in (o.split("=", 1) for o in args.policy_options)}
    work = Path(tempfile.mkdtemp(prefix="flywheel-dp-bench-"))
    policy = create_policy("tiny", options, args.seed)
    policy.module.eval()
    digest = save_checkpoint(str(work / "ck0"), policy, None, {"policy_version": 0})
    rows = sampled_rows(policy, digest, args.rows, args.seed)
    folder = work / "trajectories" / "iteration=1" / "domain=a"
    folder.mkdir(parents=True)
    pq.write_table(rows_to_file_table("trajectories", rows), folder / "part-00000.parquet")
    cfg = TrainConfig(minibatch_size=args.minibatch_size, epochs=args.epochs)
    env = {**os.environ, "FLYWHEEL_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}
    n_params = sum(p.numel() for p in policy.module.parameters())
    print(f"tiny policy {options or 'defaults'} ({n_params} parameters), {len(rows)} rows, "
          f"minibatch {cfg.minibatch_size}, {cfg.epochs} epochs, seed {args.seed}, "
          f"sharding {args.sharding}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    best = {(kind, n): float("inf") for kind in ("command", "update") for n in (1, 2)}
    for repeat in range(args.repeats):
        for processes in (1, 2):
            spec = spec_of(str(work / "trajectories" / "iteration=1"), str(work / "ck0"),
                           str(work / f"out-{processes}"), cfg, seed=args.seed,
                           result=str(work / f"result-{processes}.json"),
                           algorithm=Algorithm(loss="dapo"), sharding=args.sharding)
            spec_path = work / f"spec-{processes}.json"
            spec_path.write_text(json.dumps(spec))
            cmd = command(str(spec_path), processes)
            if repeat == 0:
                print("$", " ".join(cmd))
            started = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, capture_output=True)
            wall = time.perf_counter() - started
            out = subprocess.run(command(str(spec_path), processes, worker=True), env=env,
                                 check=True, capture_output=True, text=True).stdout
            update = float(out.split("update seconds ")[1].split()[0])
            best["command", processes] = min(best["command", processes], wall)
            best["update", processes] = min(best["update", processes], update)
            print(f"  {processes} process(es), run {repeat + 1}: command {wall:.2f} s, "
                  f"update {update:.2f} s")
    a, b = (load_checkpoint(str(work / f"out-{n}")).policy.module.state_dict() for n in (1, 2))
    diff = max((a[k] - b[k]).abs().max().item() for k in a)
    steps = json.loads((work / "result-1.json").read_text())["stats"]["n_steps"]
    for kind in ("command", "update"):
        one, two = best[kind, 1], best[kind, 2]
        print(f"best {kind} seconds: 1 process {one:.2f}, 2 processes {two:.2f}; "
              f"speed-up {one / two:.2f}x")
    print(f"{steps} optimizer steps; max |weight difference| 1 vs 2 processes {diff:.2g}")
    os.environ.update(env)  # the lane's ranks inherit it
    specs = [spec_of(str(work / "trajectories" / "iteration=1"), str(work / "ck0"),
                     str(work / f"served-{k}"), cfg, seed=args.seed, result="",
                     algorithm=Algorithm(loss="dapo"), sharding=args.sharding) for k in (1, 2)]
    first, second = served(work, specs)
    print(f"2 ranks kept up (TrainerLane): update 1 {first:.2f} s (with the launch), update 2 "
          f"{second:.2f} s; a launch per update: {best['command', 2]:.2f} s each")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
