"""What a repository tool call costs as the snapshot grows: sent inline with each call, or
stored and mounted read-only as a base (families/repository/repo_base.py) with only the changes sent.

    python bench/repo_snapshot_sizes.py

Synthetic packages of 20, 500 and 2,000 files of 3.6 KB; per size and form, five read_file calls
(median wall ms and the harness's own rebuild ms), then an edit and a shell change whose diff
must still score 1. Uses $FLYWHEEL_SNAPSHOT_STORE=/tmp/fw-store.
"""
import os
import statistics
import time

os.environ["FLYWHEEL_SNAPSHOT_STORE"] = "/tmp/fw-store"
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call
from flywheel.domains.report_channel import harness_report
from flywheel.families.repository.repo import REPORT_MARKER
from flywheel.families.repository.repo_snapshot import SnapshotStore
from flywheel.sandbox import get_backend
from flywheel.verifiers import get_verifier
D = get_domain("repo")
for n_files in (20, 500, 2000):
    files = {f"pkg/m{i}.py": ("x = 1\n" * 600) for i in range(n_files)}
    files["pkg/__init__.py"] = "def total(xs):\n    return sum(xs) - 1\n"
    rows = {}
    for form in ("inline", "stored"):
        repo = {"files": files} if form == "inline" else {"snapshot": SnapshotStore("/tmp/fw-store").put(files), "store": "/tmp/fw-store"}
        task = D.normalize_task({"task_id": "big", "domain": "repo", "prompt": "p", "repo": repo,
            "hidden_tests": [{"id": "h", "module": "pkg", "call": "total([1, 2])", "expect": 3}]})
        with get_backend("local") as sb:
            r = ToolRunner(sb); wall, rebuild = [], []
            state = D.start_state(task)
            for k in range(5):
                t = time.perf_counter()
                step = D.step(task, state, render_call(ToolCall("read_file", {"path": "pkg/m1.py", "start": 1, "end": 2})), r)
                wall.append((time.perf_counter() - t) * 1000)
                rebuild.append((harness_report(step.result, REPORT_MARKER)[0] or {}).get("rebuild_ms"))
            edit = D.step(task, state, render_call(ToolCall("edit_file", {"path": "pkg/__init__.py", "old": "- 1", "new": ""})), r)
            assert edit.state["changes"] == {"pkg/__init__.py": "def total(xs):\n    return sum(xs) \n"}, edit.observation
            shell = D.step(task, edit.state, render_call(ToolCall("run_shell", {"command": "echo y >> pkg/m3.py; rm pkg/m4.py"})), r)
            assert set(shell.state["changes"]) == {"pkg/__init__.py", "pkg/m3.py", "pkg/m4.py"}, shell.state["changes"].keys()
            diff = D.final_response(task, edit.state)
            v = get_verifier("repo_tests")(task, diff, D.run(sb, task, diff))
        rows[form] = (statistics.median(wall), statistics.median(rebuild), v.reward)
    print(f"{n_files} files ({sum(map(len, files.values()))/1e6:.1f} MB): " + "; ".join(f"{k}: call {a:.0f} ms, rebuild {b:.0f} ms, fix scores {c}" for k, (a, b, c) in rows.items()))
