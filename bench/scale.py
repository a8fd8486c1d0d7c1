"""One iteration at growing task counts through the real pipeline and the real sandbox, with the
`standin` policy (no model cost), and `flywheel sql` over a million trajectory rows.

    python bench/scale.py [--sizes 1000,10000,100000] [--domains add,pyexpr] [--sql-rows 1000000]

A size is the number of attempts of the iteration: size/2 tasks, 2 samples each.

Each size is one `flywheel run --iterations 1` in a process of its own (DirectRunner in memory,
the `local` warm sandbox): `pyexpr` attempts really run in the sandbox, `add` ones are verified
without it. Printed per size: wall time of the whole command, of the rollout and of the training
(from run.log), attempts per second, rows written, and the command's peak RSS (the largest process:
the driver, which is also the Beam worker here). Then the trajectories of the largest size are
copied to --sql-rows rows (fresh task ids, the same schema) and a per-domain aggregate is timed
through `flywheel sql`'s own connection (median of 5).
"""

from __future__ import annotations

import argparse
import os
import re
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


def run_size(tasks: int, domains: list[str], root: Path) -> dict:
    run_dir = root / f"run-{tasks}"
    command = [sys.executable, "-m", "flywheel.pipelines.cli", "run", "--run-dir", str(run_dir),
               "--iterations", "1", "--policy", "standin", "--domains", ",".join(domains),
               "--tasks-per-domain", str(tasks // len(domains) // 2), "--n-samples", "2",
               "--heldout-per-domain", "10"]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{tasks} tasks: flywheel run failed: {proc.stderr.read()[-2000:]}")
    log = (run_dir / "run.log").read_text()
    rollout, train = map(float, TIMING.search(log).groups())
    rows = int(re.search(r"rows_trajectories=(\d+)", log).group(1))
    return {"tasks": tasks, "attempts": rows, "wall": wall, "rollout": rollout, "train": train,
            "rss_mb": usage.ru_maxrss / 1024, "run_dir": run_dir}


def sql_figure(run_dir: Path, rows: int, root: Path) -> tuple[float, int]:
    """Seconds (median of 5) of a per-domain aggregate over `rows` trajectory rows."""
    from flywheel.pipelines.sql import connect
    big = root / "sql-run"
    source = run_dir / "tables" / "trajectories" / "iteration=0"
    for part in source.glob("domain=*"):
        table = pq.read_table(next(part.glob("*.parquet")))
        copies = -(-rows // (table.num_rows * len(list(source.glob("domain=*")))))
        out = big / "tables" / "trajectories" / "iteration=0" / part.name
        out.mkdir(parents=True)
        for k in range(copies):
            ids = pc.binary_join_element_wise(table["task_id"], pa.scalar(f"-copy{k}"), "")
            pq.write_table(table.set_column(table.schema.get_field_index("task_id"), "task_id", ids),
                           out / f"part-{k:05d}.parquet")
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
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000,10000", help="task counts, comma-separated")
    p.add_argument("--domains", default="add,pyexpr")
    p.add_argument("--sql-rows", type=int, default=1_000_000)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="flywheel-scale-"))
    try:
        results = [run_size(int(n), args.domains.split(","), root) for n in args.sizes.split(",")]
        table = Table("tasks", "attempts", "wall s", "rollout s", "train s", "attempts/s (rollout)",
                      "rollout s per 1k", "peak RSS MB",
                      title="one iteration, standin policy, local warm sandbox (DirectRunner)")
        for r in results:
            table.add_row(str(r["tasks"] // 2), str(r["attempts"]), f"{r['wall']:.1f}", f"{r['rollout']:.1f}",
                          f"{r['train']:.1f}", f"{r['attempts'] / r['rollout']:.0f}",
                          f"{1000 * r['rollout'] / r['attempts']:.2f}", f"{r['rss_mb']:.0f}")
        Console(width=160).print(table)
        if args.sql_rows:
            seconds, total = sql_figure(results[-1]["run_dir"], args.sql_rows, root)
            print(f"flywheel sql: per-domain aggregate over {total:,} trajectory rows: {seconds:.3f} s "
                  f"(median of 5)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
