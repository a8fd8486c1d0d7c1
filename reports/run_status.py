"""`flywheel status --run-dir D`: what a run has done and is doing, even while another process
writes it.

    flywheel status --run-dir runs/demo            # a few lines for people
    flywheel status --run-dir runs/demo --format json

The running `flywheel run` records its stage in `<run>/status.json` (`StageRecorder`, written
atomically at every stage change: warm start, rollout, train, committed, done), with its pid and
host, so a reader can tell a live run from one that was killed. Everything else is read from
committed iterations only (commit markers, and each committed iteration's own table partitions),
never from files of the iteration being written, so a reader cannot trip over half a Parquet file.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import time
from collections import Counter

from flywheel.loop.episode_watch import ended_episodes
from flywheel.settings.layout import RunLayout

STATUS_FILE = "status.json"


class StageRecorder:
    """The driver's event handler that keeps `<run>/status.json` current."""

    def __init__(self, run_dir: str):
        self.layout = RunLayout(run_dir)
        self.state = {"pid": os.getpid(), "host": socket.gethostname(), "stage": "starting",
                      "iteration": None, "started_at": _now()}

    def _write(self, **changes) -> None:
        self.state.update(changes, updated_at=_now())
        if "stage" in changes:
            self.state["stage_since"] = self.state["updated_at"]
        self.layout.write_json(self.layout.join(STATUS_FILE), self.state)

    def event(self, name: str, data: dict) -> None:
        if name == "run_begin":
            self._write(stage="starting", iteration=data["first"], iterations=data["iterations"])
        elif name == "warm_start_begin":
            self._write(stage="warm start")
        elif name == "warm_start_step":
            self._write(warm_start_step=data["step"])
        elif name == "rollout_begin":
            self._write(stage="rollout", iteration=data["iteration"])
        elif name == "train_begin":
            self._write(stage="train", iteration=data["iteration"])
        elif name == "eval_begin":
            self._write(stage="evaluation", iteration=data["iteration"])
        elif name == "iteration_end":
            self._write(stage="committed", iteration=data["iteration"])
        elif name == "run_end":
            self._write(stage="done")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _writer_alive(state: dict) -> bool | None:
    """Whether the process that wrote `state` still runs (None: on another host, unknown)."""
    if state.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(state["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, KeyError, TypeError, ValueError):
        return None
    return True


def run_status(run_dir: str) -> dict:
    """The run's status as plain data (what `flywheel status` prints)."""
    layout = RunLayout(run_dir)
    if not layout.exists(layout.run_json):
        raise FileNotFoundError(f"{run_dir} holds no run (no run.json)")
    info = layout.read_json(layout.run_json)
    committed = layout.committed_iterations()
    planned = info.get("config", {}).get("iterations")
    status_path = layout.join(STATUS_FILE)
    state = layout.read_json(status_path) if layout.exists(status_path) else {}
    planned = state.get("iterations", planned)
    alive = _writer_alive(state) if state else None
    current = None
    between = state.get("stage") == "committed" and len(committed) < (planned or 0)  # next not begun
    if state and (state.get("stage") not in ("done", "committed") or between):
        current = {"iteration": state.get("iteration"), "stage": state.get("stage"),
                   "since": state.get("stage_since"), "pid": state.get("pid"),
                   "host": state.get("host"), "writer_alive": alive}
        if state.get("stage") == "warm start":
            current["warm_start_step"] = state.get("warm_start_step")
        if current.get("iteration") is not None:
            current["episodes"] = ended_episodes(layout.root, int(current["iteration"]))
    elif not state and len(committed) < (planned or 0):
        k = committed[-1] + 1 if committed else 0
        current = {"iteration": k, "stage": "unknown", "writer_alive": None,
                   "episodes": ended_episodes(layout.root, k)}
    summaries = {k: layout.read_json(layout.commit_marker(k)) for k in committed[-1:]}
    last = committed[-1] if committed else None
    return {"run_dir": run_dir, "run_id": info.get("run_id"), "seed": info.get("seed"),
            "iterations_planned": planned, "committed": committed, "in_progress": current,
            "last_iteration_seconds": _seconds(summaries.get(last)),
            "heldout_pass@1": _heldout(layout, last), "errors": _errors(layout, committed),
            "review": _review(run_dir)}


def _review(run_dir: str) -> dict | None:
    """Attempts queued for people and their labels (feedback/review_stats.py), or None."""
    from flywheel.feedback.review_stats import read_rows, review_counts
    queue, reviews = read_rows(run_dir)
    if not queue:
        return None
    counts = review_counts(queue, reviews)
    return {k: sum(c[k] for c in counts) for k in ("queued", "audit", "labeled", "pending")}


def _seconds(summary: dict | None) -> dict | None:
    if not summary:
        return None
    return {"rollout": round(summary.get("rollout_seconds", 0.0), 1),
            "train": round(summary.get("train_seconds", 0.0), 1)}


def _heldout(layout: RunLayout, iteration: int | None) -> dict[str, float]:
    if iteration is None:
        return {}
    table = _partition(layout, "metrics", iteration)
    return {r["domain"]: r["value"] for r in table.to_pylist() if r["name"] == "heldout_pass@1"}


def _errors(layout: RunLayout, committed: list[int]) -> dict[str, dict[str, int]]:
    """{kind: {stage: count}} over the committed iterations."""
    counts: Counter = Counter()
    for k in committed:
        for row in _partition(layout, "errors", k).select(["kind", "stage"]).to_pylist():
            counts[(row["kind"], row["stage"])] += 1
    out: dict[str, dict[str, int]] = {}
    for (kind, stage), n in sorted(counts.items()):
        out.setdefault(kind, {})[stage] = n
    return out


def _partition(layout: RunLayout, table: str, iteration: int):
    from flywheel.schemas import read_table
    return read_table(layout.table_dir(table, iteration), table)


def status_lines(status: dict) -> list[str]:
    """The status for people, one fact per line."""
    committed, planned = status["committed"], status["iterations_planned"]
    lines = [f"run {status['run_dir']} (run_id {status['run_id']}, seed {status['seed']})"]
    done = (f"{committed[0]}-{committed[-1]}" if len(committed) > 1 else
            str(committed[0]) if committed else "none")
    lines.append(f"committed iterations: {done} ({len(committed)} of {planned})")
    current = status["in_progress"]
    if current:
        stage = current["stage"] + (f" step {current['warm_start_step']}"
                                    if current.get("warm_start_step") else "")
        since = ""
        if current.get("since"):
            age = time.time() - dt.datetime.fromisoformat(current["since"]).timestamp()
            since = f" for {age:.0f} s"
        who = {True: f"pid {current.get('pid')} running",
               False: f"pid {current.get('pid')} is gone: resume with flywheel run --run-dir "
                      f"{status['run_dir']}",
               None: "writer not visible from here"}[current["writer_alive"]]
        lines.append(f"in progress: iteration {current['iteration']}, {stage}{since} ({who})")
        episodes = current.get("episodes")
        if episodes:
            ends = ", ".join(f"{end} {n}" for end, n in episodes["by_end"].items())
            lines.append(f"episodes ended in iteration {current['iteration']}: "
                         f"{episodes['ended']} ({ends}; {episodes['turns']} turns, "
                         f"{episodes['seconds']} s), kept for a resume in {episodes['folder']}")
    elif planned is not None and len(committed) >= planned:
        lines.append("in progress: nothing (the run is complete)")
    if status["last_iteration_seconds"]:
        s = status["last_iteration_seconds"]
        lines.append(f"last iteration took: rollout {s['rollout']} s, train {s['train']} s")
    rates = status["heldout_pass@1"]
    if rates:
        shown = " ".join(f"{'all' if d == '*' else d} {v:.3f}" for d, v in
                         sorted(rates.items(), key=lambda kv: (kv[0] == "*", kv[0])))
        lines.append(f"held-out pass@1 (iteration {committed[-1]}): {shown}")
    errors = status["errors"]
    if errors:
        lines.append("errors by kind: " + "; ".join(
            f"{kind} {sum(stages.values())} ("
            + ", ".join(f"{stage} {n}" for stage, n in stages.items()) + ")"
            for kind, stages in errors.items()))
    else:
        lines.append("errors by kind: none")
    review = status.get("review")
    if review:
        lines.append(f"review: {review['pending']} of {review['queued']} queued attempts await a "
                     f"label ({review['audit']} audits); {review['labeled']} labelled "
                     "(flywheel review serve)")
    return lines
