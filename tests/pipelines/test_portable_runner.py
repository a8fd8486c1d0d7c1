"""One iteration's rollout on Beam's PortableRunner (the Fn API path Flink and Dataflow Runner v2
use): a local job service and an external worker pool in processes of their own, the same rows as
the DirectRunner. Nothing may rely on driver-process globals or files only the driver sees."""

import socket
import subprocess
import sys
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import IterationSpec, run_rollout

from tests.run_configs import tiny_config

# What differs between two runs of the same seed: clocks, durations, where the sandbox ran.
VOLATILE = {"started_at", "finished_at", "created_at", "sandbox_wall_ms", "sandbox_cpu_ms", "turns"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout_s} s")


@pytest.fixture(scope="module")
def portable():
    """Pipeline options for a local job service and a worker pool (separate processes)."""
    job_port, pool_port = free_port(), free_port()
    procs = [subprocess.Popen([sys.executable, "-m", module, flag, str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
             for module, flag, port in (
                 ("apache_beam.runners.portability.local_job_service_main", "--port", job_port),
                 ("apache_beam.runners.worker.worker_pool_main", "--service_port", pool_port))]
    try:
        wait_for_port(job_port, procs[0], "the job service")
        wait_for_port(pool_port, procs[1], "the worker pool")
        yield [f"--runner=PortableRunner", f"--job_endpoint=localhost:{job_port}",
               "--environment_type=EXTERNAL", f"--environment_config=localhost:{pool_port}"]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def rows_of(run_dir, table):
    rows = RunLayout(str(run_dir)).read_table(table).to_pylist()
    key = ("task_id", "sample_index") if table == "trajectories" else ("domain", "name")
    return sorted(({k: v for k, v in row.items() if k not in VOLATILE} for row in rows),
                  key=lambda row: tuple(str(row.get(k)) for k in key))


@pytest.mark.slow
def test_the_portable_runner_gives_the_direct_runner_s_rows(tmp_path, portable):
    config = tiny_config(domains=("add", "pyexpr"), tasks_per_domain=3, heldout_per_domain=2, n_samples=2)
    spec = IterationSpec("portable", 0, policy_version=0, checkpoint_uri=None)
    for name, args in (("direct", []), ("portable", portable)):
        run_rollout(config, spec, RunLayout(str(tmp_path / name)), PipelineOptions(args))
    for table in ("trajectories", "metrics"):
        direct, ported = rows_of(tmp_path / "direct", table), rows_of(tmp_path / "portable", table)
        assert direct and ported == direct, table
    assert {r["sandbox_backend"] for r in rows_of(tmp_path / "portable", "trajectories")
            if r["domain"] == "pyexpr"} == {"local"}  # really executed, in the pool's workers
