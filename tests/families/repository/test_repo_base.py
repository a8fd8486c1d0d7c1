"""A stored snapshot runs as a read-only base the sandbox mounts, with only the changes sent: the
same episode and score as inline, changes found by stat (a file put back to its old bytes and
time is no change), and the base itself out of the code's reach."""

import os
import shutil
import tempfile

import pytest

from flywheel.domains.registry import get_domain
from flywheel.families.repository.repo_base import materialized
from flywheel.families.repository.repo_snapshot import SnapshotStore
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call
from flywheel.verifiers import get_verifier

DOMAIN = get_domain("repo")
FILES = {"calc/__init__.py": "", "calc/ops.py": "def total(xs):\n    return sum(xs) - 1\n",
         **{f"calc/data{i}.py": f"VALUE = {i}\n" * 50 for i in range(30)}}


@pytest.fixture
def stored(tmp_path, monkeypatch):
    cache = tempfile.mkdtemp(prefix="flywheel-test-cache-")  # pytest's tmp_path is 0700: the
    os.chmod(cache, 0o755)                                   # sandbox's uid could not reach it
    monkeypatch.setenv("FLYWHEEL_SNAPSHOT_CACHE", cache)
    store = str(tmp_path / "store")
    monkeypatch.setenv("FLYWHEEL_SNAPSHOT_STORE", store)  # snapshots are read from the user's store
    repo = {"snapshot": SnapshotStore(store).put(FILES), "store": store}
    yield DOMAIN.normalize_task({
        "task_id": "stored-1", "domain": "repo", "prompt": "total() is off by one", "repo": repo,
        "hidden_tests": [{"id": "h", "module": "calc.ops", "call": "total([2, 3])", "expect": 5}],
        "regression_tests": [{"id": "r", "module": "calc.data7", "call": "VALUE", "expect": 7}]})
    shutil.rmtree(cache, ignore_errors=True)


def step(task, state, sandbox, name, **arguments):
    return DOMAIN.step(task, state, render_call(ToolCall(name, arguments)), ToolRunner(sandbox))


def test_a_stored_snapshot_episode_sends_only_its_changes(stored, sandbox):
    request = DOMAIN.tool_request(stored, {"changes": {"calc/ops.py": "x = 1\n"}},
                                  ToolCall("read_file", {"path": "calc/ops.py"}))
    assert '"tree"' not in request.stdin and '"changes"' in request.stdin and len(request.mounts) == 1
    state = DOMAIN.start_state(stored)
    edited = step(stored, state, sandbox, "edit_file", path="calc/ops.py", old=" - 1", new="")
    assert edited.state["changes"] == {"calc/ops.py": "def total(xs):\n    return sum(xs)\n"}
    shell = step(stored, edited.state, sandbox, "run_shell",
                 command="echo 'VALUE = 0' >> calc/data7.py && rm calc/data9.py && "
                         "cp -p calc/data3.py /tmp/keep && echo x >> calc/data3.py && "
                         "cp -p /tmp/keep calc/data3.py && cat calc/ops.py")
    assert "return sum(xs)" in shell.observation  # the change laid over the base
    assert set(shell.state["changes"]) == {"calc/ops.py", "calc/data7.py", "calc/data9.py"}
    assert shell.state["changes"]["calc/data9.py"] is None  # data3 is back to its bytes: no change
    diff = DOMAIN.final_response(stored, edited.state)
    verdict = get_verifier("repo_tests")(stored, diff, DOMAIN.run(sandbox, stored, diff))
    assert verdict.reward == 1.0, verdict
    broke = DOMAIN.final_response(stored, shell.state)  # data7 now ends VALUE = 0: a regression
    assert get_verifier("repo_tests")(stored, broke, DOMAIN.run(sandbox, stored, broke)).reward == 0.0


def test_the_base_is_read_only_and_written_once(stored, sandbox):
    got = step(stored, DOMAIN.start_state(stored), sandbox, "run_shell",
               command="echo x > /opt/flywheel-repo/tree/calc/ops.py; echo x > /opt/flywheel-repo/new")
    assert got.observation.count("Read-only file system") == 2, got.observation
    folder = materialized(FILES, stored["repo"]["snapshot"])
    assert materialized(FILES, stored["repo"]["snapshot"]) == folder
    assert open(os.path.join(folder, "tree", "calc", "ops.py")).read() == FILES["calc/ops.py"]
    assert not [n for n in os.listdir(os.path.dirname(folder)) if ".tmp-" in n]
