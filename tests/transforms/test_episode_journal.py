"""The episode journal (transforms/episode_journal.py), for real: a rollout of tiny-policy
episodes in the local sandbox writes each ended (and scored) episode as it ends; a rerun of the
iteration with half the journal left (as a kill leaves it) runs only the other half and writes the
same rows as the uninterrupted run; an entry sampled by other weights or cut short is run again;
the driver's watch sends one event per ended episode; `flywheel status` counts them; a `flywheel
run` killed with SIGKILL mid-rollout resumes with what had ended (slow)."""

import os

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.loop.episode_watch import EpisodeWatch, ended_episodes
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import run_rollout
from flywheel.transforms.episode_journal import EpisodeJournal, episode_key, journal_folder

from tests.transforms.test_episode_loop import SPEC, config, without_volatile

pytestmark = pytest.mark.xdist_group("episodes")


def rollout(run_dir, cfg=None):
    """(trajectory rows without timings, the run's counters)."""
    layout = RunLayout(str(run_dir))
    result = run_rollout(cfg or config(), SPEC, layout, PipelineOptions([]))
    counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    rows = layout.read_table("trajectories").to_pylist()
    return sorted((without_volatile(r) for r in rows),
                  key=lambda r: (r["task_id"], r["sample_index"])), counters


def drop_tables(run_dir):
    import shutil
    shutil.rmtree(run_dir / "tables")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("journaled")
    rows, counters = rollout(run_dir)
    return run_dir, rows, counters


def test_every_ended_episode_is_journaled_as_it_ends(uninterrupted):
    run_dir, rows, counters = uninterrupted
    journal = EpisodeJournal(journal_folder(str(run_dir), SPEC.iteration))
    headers = journal.headers()
    assert counters["episodes_journaled"] == counters["episodes_run"] == len(rows) == len(headers) == 12
    assert {(h["task_id"], h["sample_index"]) for h in headers} == \
        {(r["task_id"], r["sample_index"]) for r in rows}
    assert all(h["digest"] and h["turns"] >= 1 and h["end"] for h in headers)
    assert journal.keys() == {h["key"] for h in headers}  # one listing: what a bundle reads
    entry = journal.read(headers[0]["key"])
    assert entry is not None and episode_key(entry.attempt) == headers[0]["key"]
    assert entry.attempt.episode is None and entry.attempt.episode_end == headers[0]["end"]
    assert entry.attempt.execution is not None  # ended and scored in the loop: as the rows have it
    assert [t["checkpoint_digest"] for t in entry.attempt.turns] == \
        [headers[0]["digest"]] * len(entry.attempt.turns)


def test_a_rerun_takes_what_ended_and_runs_the_rest_again(uninterrupted, tmp_path):
    """Half the episodes ended before a kill: the rerun takes those and runs the others, among
    them one journaled by other weights and one whose file a kill cut short."""
    source, rows, _ = uninterrupted
    there = EpisodeJournal(journal_folder(str(source), SPEC.iteration))
    headers = sorted(there.headers(), key=lambda h: h["key"])
    here = EpisodeJournal(journal_folder(str(tmp_path), SPEC.iteration))
    os.makedirs(here.folder)
    for h in headers[:6]:  # ended before the kill
        with open(there.path(h["key"]), "rb") as f, open(here.path(h["key"]), "wb") as g:
            g.write(f.read())
    other = there.read(headers[6]["key"])
    here.write(other.attempt, other.errors, "0" * 64, 1.0)  # sampled by other weights
    with open(there.path(headers[7]["key"]), "rb") as f, open(here.path(headers[7]["key"]), "wb") as g:
        g.write(f.read()[:-7])  # cut short (a rename makes this rare; still refused)
    assert here.read(headers[7]["key"]) is None and here.read(headers[0]["key"]) is not None
    again, counters = rollout(tmp_path)
    assert counters["episodes_resumed"] == 6 and counters["episodes_run"] == 6
    assert again == rows


def test_the_watch_sends_one_event_per_ended_episode_and_status_counts_them(uninterrupted, tmp_path):
    source, rows, _ = uninterrupted
    events = []
    folder = journal_folder(str(tmp_path), 3)
    journal, there = EpisodeJournal(folder), EpisodeJournal(journal_folder(str(source), SPEC.iteration))
    headers = there.headers()
    first = there.read(headers[0]["key"])
    journal.write(first.attempt, first.errors, headers[0]["digest"], 1.0)  # from before the watch
    with EpisodeWatch(folder, 3, lambda name, data: events.append((name, data)), every_s=0.05) as watch:
        for h in headers[1:4]:
            entry = there.read(h["key"])
            journal.write(entry.attempt, entry.errors, h["digest"], 2.5)
    assert [name for name, _ in events] == ["episode_end"] * 3 and watch.ended == 4
    assert [d["ended"] for _, d in events] == [2, 3, 4]
    assert {(d["task_id"], d["sample_index"]) for _, d in events} == \
        {(h["task_id"], h["sample_index"]) for h in headers[1:4]}
    counted = ended_episodes(str(tmp_path), 3)
    assert counted["ended"] == 4 and sum(counted["by_end"].values()) == 4
    RunLayout(str(tmp_path)).delete_paths([folder])  # as the commit of the iteration does
    assert ended_episodes(str(tmp_path), 3) is None


@pytest.mark.slow  # two `flywheel run` processes
def test_kill_9_mid_rollout_keeps_the_ended_episodes_and_the_resume_takes_them(tmp_path):
    import json
    import signal
    import subprocess
    import sys
    import time

    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "flywheel.cli.main", "run", "--run-dir", str(run_dir),
           "--iterations", "1", "--domains", "fix_function", "--tasks-per-domain", "40",
           "--heldout-per-domain", "0", "--n-samples", "4", "--max-turns", "3",
           "--warm-start-max-steps", "0", "--seed", "5", "--set", "episode.concurrency=1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    journal = EpisodeJournal(journal_folder(str(run_dir), 0))
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and len(journal.headers()) < 5:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    ended = len(journal.headers())
    assert 5 <= ended < 160 and RunLayout(str(run_dir)).committed_iterations() == []
    status = subprocess.run([sys.executable, "-m", "flywheel.cli.main", "status", "--run-dir",
                             str(run_dir)], capture_output=True, text=True, timeout=120)
    assert f"episodes ended in iteration 0: {ended} (" in status.stdout, status.stdout
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    marker = json.loads((run_dir / "iterations" / "0" / "_COMMITTED").read_text())
    counters = marker["counters"]
    assert counters["episodes_resumed"] >= ended and \
        counters["episodes_resumed"] + counters["episodes_run"] == 160
    assert not os.path.exists(journal.folder)  # committed: the tables hold them
    log = (run_dir / "run.log").read_text() if (run_dir / "run.log").exists() else ""
    assert "episode " in log or "episodes ended" in done.stdout


class _Canary:
    """Unpickling this writes a file: what a planted journal entry would do in a resume."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_an_entry_that_needs_unpickling_is_refused_and_runs_nothing(uninterrupted, tmp_path):
    from flywheel.transforms.attempt_coder import AttemptCoder
    from flywheel.records.journal_files import _LEN, MAGIC
    source, _, _ = uninterrupted
    there = EpisodeJournal(journal_folder(str(source), SPEC.iteration))
    header = there.headers()[0]
    entry = there.read(header["key"])
    canary = tmp_path / "canary"
    planted = entry.attempt.replace(task={**entry.attempt.task, "x": _Canary(str(canary))})
    import json as _json
    import apache_beam as beam
    pickling = AttemptCoder(values=beam.coders.FastPrimitivesCoder())  # pickles what it does not know
    parts = [_json.dumps(header).encode(), pickling.encode(planted), there._errors.encode([])]
    here = EpisodeJournal(str(tmp_path / "journal"))
    os.makedirs(here.folder)
    with open(here.path(header["key"]), "wb") as f:
        f.write(MAGIC + b"".join(_LEN.pack(len(p)) + p for p in parts))
    assert here.read(header["key"]) is None and not canary.exists()
    with pytest.raises(TypeError, match="only primitives"):  # nor is such a value written
        here.write(planted, [], header["digest"], 1.0)
