"""`flywheel replay` on a real multi-turn run: same observations give 0, a record that does not
describe what ran gives a difference, a missing trajectory exit 2."""

import subprocess

import pytest

from flywheel.domains.registry import get_domain
from flywheel.settings.layout import RunLayout
from flywheel.cli.replay import replay_turns
from flywheel.sandbox import get_backend

# One pytest worker runs the module: its run (the module fixture) is made once, not per worker.
# A full run: the quick tier (-m "not slow") leaves it to the whole suite.
pytestmark = [pytest.mark.xdist_group("replay"), pytest.mark.slow]


def flywheel(*args, timeout=300):
    return subprocess.run(["flywheel", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("replay") / "run"
    done = flywheel("run", "--run-dir", str(run_dir), "--iterations", "1", "--domains", "fix_function",
                    "--tasks-per-domain", "4", "--n-samples", "4", "--heldout-per-domain", "2",
                    "--warm-start-max-steps", "20")
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir


def test_replay_matches_the_record(run_dir):
    rows = RunLayout(str(run_dir)).read_table("trajectories").to_pylist()
    row = max(rows, key=lambda r: len(r["turns"]))
    assert len(row["turns"]) > 1
    replayed = flywheel("replay", "--run-dir", str(run_dir),
                        f"{row['iteration']}/{row['task_id']}/{row['sample_index']}")
    assert replayed.returncode == 0, replayed.stdout
    assert replayed.stdout.count(" same") == len(row["turns"])
    assert f"{len(row['turns'])} turns, 0 differ" in replayed.stdout


def test_a_record_that_differs_is_found(run_dir):
    row = RunLayout(str(run_dir)).read_table("trajectories").to_pylist()[0]
    task = get_domain("fix_function").make_task("train", int(row["task_id"].rsplit("-", 1)[1]), seed=0)
    assert task["prompt"] == row["prompt"]
    forged = [{**row["turns"][0], "observation": "ok"}, *row["turns"][1:]]
    backend = get_backend("local")
    try:
        results = list(replay_turns(task, forged, backend, 2000))
    finally:
        backend.close()
    assert results[0][2] == "ok" and results[0][3] == row["turns"][0]["observation"] != "ok"


def test_unknown_trajectory_and_bad_id_exit_2(run_dir):
    missing = flywheel("replay", "--run-dir", str(run_dir), "0/fix_function-train-999999/0")
    assert missing.returncode == 2 and "no trajectory 0/fix_function-train-999999/0" in missing.stdout
    bad = flywheel("replay", "--run-dir", str(run_dir), "task-without-iteration")
    assert bad.returncode == 2 and "is not ITERATION/TASK_ID/SAMPLE_INDEX" in bad.stdout


def run_dir_naming(run_dir, tmp_path, sandbox, options=()):
    """A copy of the run whose run.json says it ran on `sandbox` (as another person's run might)."""
    import json
    import shutil
    copy = tmp_path / f"run-{sandbox}"
    shutil.copytree(run_dir, copy)
    run_json = json.loads((copy / "run.json").read_text())
    run_json["config"]["rollout"].update(sandbox=sandbox, sandbox_options=list(options))
    (copy / "run.json").write_text(json.dumps(run_json))
    return copy


def test_a_run_dir_cannot_choose_an_unisolated_backend(run_dir, tmp_path):
    """A run that names `unsafe-subprocess` (or `remote`, or a backend replay does not know) is
    not replayed on it: exit 2 before any sandbox starts, and the message says how to choose."""
    row = max(RunLayout(str(run_dir)).read_table("trajectories").to_pylist(), key=lambda r: len(r["turns"]))
    trajectory = f"{row['iteration']}/{row['task_id']}/{row['sample_index']}"
    copies = {}
    for sandbox, options in [("unsafe-subprocess", ()), ("remote", ("urls=http://127.0.0.1:9",)),
                             ("no-such-backend", ())]:
        copy = copies[sandbox] = run_dir_naming(run_dir, tmp_path, sandbox, options)
        refused = flywheel("replay", "--run-dir", str(copy), trajectory)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"the run's sandbox backend '{sandbox}'" in refused.stdout
        assert "--sandbox local" in refused.stdout and f"--sandbox {sandbox}" in refused.stdout
        assert "turn 1" not in refused.stdout and "isolates nothing (host files" not in refused.stderr
    # Named on the command line, the isolated backend replays the same run.
    chosen = flywheel("replay", "--run-dir", str(copies["unsafe-subprocess"]), trajectory,
                      "--sandbox", "local")
    assert chosen.returncode == 0 and f"{len(row['turns'])} turns, 0 differ" in chosen.stdout, chosen.stdout
    assert "isolates nothing" not in chosen.stderr
