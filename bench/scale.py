"""One iteration at growing task counts through the real pipeline and the real sandbox, with the
`standin` policy (no model cost), the trainer alone on a large table, and `flywheel sql` over a
million trajectory rows.

    python bench/scale.py [--sizes 1000,10000,100000] [--domains add,pyexpr] [--sql-rows 1000000]
                          [--run-args "--direct_running_mode=multi_processing --direct_num_workers=2"]
                          [--train-rows 10000,100000]

A size is the number of attempts of the iteration: size/2 tasks, 2 samples each.

Each size is one `flywheel run --iterations 1` in a process of its own (DirectRunner in memory
unless --run-args says otherwise; the `local` warm sandbox): `pyexpr` attempts really run in the
sandbox, `add` ones are verified without it. Printed per size: wall time of the whole command, of
the rollout and of the training (from run.log), attempts per second, rows written, and peak RSS:
of the driver process itself (which is also the Beam worker in memory) and of the largest Beam
SDK worker process it started (multi_processing mode). --run-args are added to every
`flywheel run` (Beam options pass through, e.g. --shards 8 or the running mode).

--train-rows N[,M...] copies the largest size's trajectories to N rows (fresh task ids, every row
with signal: advantage +-1, not filtered) and trains one update on them twice, each in a fresh
process: with `train_iteration` (streamed) and with the former read (all rows to_pylist, then
train_on_rows); printed: seconds and peak RSS of each.

Then the trajectories of the largest size are copied to --sql-rows rows (fresh task ids, the same
schema) and a per-domain aggregate is timed through `flywheel sql`'s own connection (median of 5).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

TIMING = re.compile(r"timing iteration 0: rollout ([\d.]+) s, train ([\d.]+) s")


def run_size(tasks: int, domains: list[str], root: Path, run_args: list[str]) -> dict:
    run_dir = root / f"run-{tasks}"
    command = [sys.executable, __file__, "--measure", "run", "--run-dir", str(run_dir),
               "--iterations", "1", "--policy", "standin", "--domains", ",".join(domains),
               "--tasks-per-domain", str(tasks // len(domains) // 2), "--n-samples", "2",
               "--heldout-per-domain", "10", *run_args]
    start = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{tasks} tasks: flywheel run failed: {proc.stderr[-2000:]}")
    log = (run_dir / "run.log").read_text()
    rollout, train = map(float, TIMING.search(log).groups())
    rows = int(re.search(r"rows_trajectories=(\d+)", log).group(1))
    return {"tasks": tasks, "attempts": rows, "wall": wall, "rollout": rollout, "train": train,
            **_rss(proc.stderr), "run_dir": run_dir}


def _rss(stderr: str) -> dict:
    """The peak RSS (MB) that a --measure process reported: its own and its largest child's."""
    usage = json.loads(re.findall(r"^PEAK_RSS (.*)$", stderr, re.M)[-1])
    return {"rss_mb": usage["self"], "children_mb": usage["children"]}


def _measure(run) -> None:
    """Call `run()` in this process, then print, in MB, as the last stderr line: the peak RSS of
    this process (ru_maxrss: the kernel's high-water mark) and of the largest Beam SDK worker it
    started (multi_processing mode; sampled every 0.2 s). Other children (sandboxes, forks that
    share the driver's pages) are left out: a fork's RSS counts pages it shares with its parent."""
    import threading
    import psutil
    peak, done = {"workers": 0.0}, threading.Event()

    def sample() -> None:
        me = psutil.Process()
        while not done.wait(0.2):
            for child in me.children(recursive=True):
                try:
                    if any("sdk_worker" in part for part in child.cmdline()):
                        peak["workers"] = max(peak["workers"], child.memory_info().rss / 2**20)
                except psutil.Error:
                    pass
    threading.Thread(target=sample, daemon=True).start()
    try:
        run()
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    finally:
        done.set()
        usage = {"self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                 "children": peak["workers"]}
        print("PEAK_RSS " + json.dumps(usage), file=sys.stderr, flush=True)


def _run_cli(argv: list[str]) -> None:
    from flywheel.cli.main import main
    raise SystemExit(main(argv))


def _train_once(mode: str, table: str, checkpoint: str, out: str) -> None:
    """One update on `table` from `checkpoint`; prints its stats (and the row count) as JSON.
    `streamed`: train_iteration; `in-memory`: the former read (every row to_pylist first)."""
    from flywheel.schemas import read_table
    from flywheel.trainer.train_step import TrainConfig
    cfg, n_rows = TrainConfig(), pq.ParquetDataset(table).read(columns=["advantage"]).num_rows
    if mode == "streamed":
        from flywheel.trainer.train import train_iteration
        stats = train_iteration(table, checkpoint, out, cfg, seed=0)
    else:
        from flywheel.policy.checkpoint import load_checkpoint
        from flywheel.trainer.optimizer import build_optimizer
        from flywheel.policy.device import pick_device
        from flywheel.trainer.train_step import train_on_rows
        from flywheel.trainer.trajectory_batches import TRAIN_COLUMNS
        rows = read_table(table, "trajectories", columns=[*TRAIN_COLUMNS, "checkpoint_digest"],
                          missing_ok=False).to_pylist()
        policy = load_checkpoint(checkpoint, device=pick_device()).policy
        stats = train_on_rows(policy, build_optimizer(policy, **cfg.adamw()), rows, cfg, seed=0)
    print(json.dumps({"n_rows": n_rows, **stats}))


def trainer_figures(run_dir: Path, rows: int, root: Path) -> list[dict]:
    """One update on `rows` copies of `run_dir`'s trajectories, streamed and read whole."""
    table = copy_trajectories(run_dir, rows, root / "train-run", signal=True)
    checkpoint = str(run_dir / "checkpoints" / "initial")  # what the rows were sampled from
    results = []
    for mode in ("streamed", "in-memory"):
        command = [sys.executable, __file__, "--measure-train", mode, str(table), checkpoint,
                   str(root / f"ck-{mode}")]
        start = time.perf_counter()
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"trainer ({mode}) failed: {proc.stderr[-2000:]}")
        stats = json.loads(proc.stdout.strip().splitlines()[-1])
        results.append({"mode": mode, "seconds": time.perf_counter() - start, **stats,
                        **_rss(proc.stderr)})
    return results


def copy_trajectories(run_dir: Path, rows: int, out_root: Path, signal: bool = False) -> Path:
    """`run_dir`'s iteration-0 trajectories copied to at least `rows` rows (fresh task ids), one
    file per copy; with `signal` every row carries signal (advantage +-1, not filtered)."""
    source = run_dir / "tables" / "trajectories" / "iteration=0"
    parts = sorted(source.glob("domain=*"))
    per_part = -(-rows // len(parts))
    for part in parts:
        table = pq.read_table(next(part.glob("*.parquet")))
        table = table.slice(0, per_part)
        if signal:
            sign = pa.array([1.0 if i % 2 else -1.0 for i in range(table.num_rows)])
            table = table.set_column(table.schema.get_field_index("advantage"), "advantage", sign)
            table = table.set_column(table.schema.get_field_index("filtered"), "filtered",
                                     pa.array([False] * table.num_rows))
        copies = -(-per_part // table.num_rows)
        out = out_root / "tables" / "trajectories" / "iteration=0" / part.name
        out.mkdir(parents=True)
        for k in range(copies):
            ids = pc.binary_join_element_wise(table["task_id"], pa.scalar(f"-copy{k}"), "")
            pq.write_table(table.set_column(table.schema.get_field_index("task_id"), "task_id", ids),
                           out / f"part-{k:05d}.parquet")
    return out_root / "tables" / "trajectories" / "iteration=0"


def sql_figure(run_dir: Path, rows: int, root: Path) -> tuple[float, int]:
    """Seconds (median of 5) of a per-domain aggregate over `rows` trajectory rows."""
    from flywheel.reports.sql import connect
    big = root / "sql-run"
    copy_trajectories(run_dir, rows, big)
    con = connect(str(big))
    total = con.execute("SELECT count(*) FROM trajectories").fetchall()[0][0]
    times = []
    for _ in range(5):
        start = time.perf_counter()
        con.execute("SELECT domain, count(*), avg(reward_raw), avg(len(response_token_ids)) "
                    "FROM trajectories GROUP BY domain").fetchall()
        times.append(time.perf_counter() - start)
    return statistics.median(times), total


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:  # a child process: `flywheel ARGS`, then its peak RSS
        return _measure(lambda: _run_cli(sys.argv[2:]))
    if sys.argv[1:2] == ["--measure-train"]:  # a child process: one update, then its peak RSS
        return _measure(lambda: _train_once(*sys.argv[2:6]))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000,10000", help="attempt counts, comma-separated")
    p.add_argument("--domains", default="add,pyexpr")
    p.add_argument("--sql-rows", type=int, default=1_000_000)
    p.add_argument("--train-rows", default="",
                   help="row counts, comma-separated: also train once on each, streamed and "
                        "read whole")
    p.add_argument("--run-args", default="", help="more `flywheel run` flags, e.g. Beam options")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="flywheel-scale-"))
    mode = args.run_args or "DirectRunner in memory"
    try:
        results = [run_size(int(n), args.domains.split(","), root, shlex.split(args.run_args))
                   for n in args.sizes.split(",")]
        table = Table("tasks", "attempts", "wall s", "rollout s", "train s", "attempts/s (rollout)",
                      "rollout s per 1k", "peak RSS MB driver", "largest Beam worker MB",
                      title=f"one iteration, standin policy, local warm sandbox ({mode})")
        for r in results:
            table.add_row(str(r["tasks"] // 2), str(r["attempts"]), f"{r['wall']:.1f}", f"{r['rollout']:.1f}",
                          f"{r['train']:.1f}", f"{r['attempts'] / r['rollout']:.0f}",
                          f"{1000 * r['rollout'] / r['attempts']:.2f}", f"{r['rss_mb']:.0f}",
                          f"{r['children_mb']:.0f}" if r["children_mb"] else "-")
        Console(width=160).print(table)
        if args.train_rows:
            table = Table("read", "rows", "rows with signal", "steps", "seconds", "peak RSS MB",
                          title="the trainer alone: one update (standin policy, TrainConfig())")
            for r in [r for n in args.train_rows.split(",")
                      for r in trainer_figures(results[-1]["run_dir"], int(n), root / f"train-{n}")]:
                table.add_row(r["mode"], str(r["n_rows"]), str(r["n_sequences"]), str(r["n_steps"]),
                              f"{r['seconds']:.1f}", f"{r['rss_mb']:.0f}")
            Console(width=160).print(table)
        if args.sql_rows:
            seconds, total = sql_figure(results[-1]["run_dir"], args.sql_rows, root)
            print(f"flywheel sql: per-domain aggregate over {total:,} trajectory rows: {seconds:.3f} s "
                  f"(median of 5)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
