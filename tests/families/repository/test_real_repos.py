"""The real-repository suite (bench/real_repos/): SWE-bench rows made from bug fixes between two
releases of public Python packages, flat and `src/` layouts, files over 64 KB among the edited
ones, scored as SWE-bench scores them: the gold patch earns 1; no change, a wrong fix, and test
edits instead of a fix (the test emptied, a conftest.py reporting every test passed) earn 0; the
fix beside a new test file of the model's own, or beside an edit of a test file the test_patch
puts back, earns 1;
`flywheel tasks validate` finds nothing wrong and a scripted episode (search, read, edit, run
the tests, submit) solves each, on `local` and `docker` (the test suite: one row of each package,
two of them on docker; FLYWHEEL_REAL_REPOS=all: every row). The environments are built offline
with `flywheel env build` from the wheels kept beside the rows."""

import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest

from flywheel.cli import main as cli_main
from flywheel.domains.registry import get_domain, prepare_task
from flywheel.domains.task_files import task_rows
from flywheel.domains.tools import ToolCall, render_call
from flywheel.verifiers import get_verifier

from tests.families.conftest import concurrently

SUITE = Path(__file__).resolve().parents[3] / "bench" / "real_repos"
TASKS = SUITE / "tasks.jsonl"
ROWS = [json.loads(line) for line in TASKS.read_text().splitlines()] if TASKS.exists() else []
IDS = [r["instance_id"] for r in ROWS]
# The test suite scores one row of each package (both layouts, large files: pyparsing core.py,
# more-itertools more.py, click core.py, wcwidth's 357 KB table), and every docker test of this
# module two of them (ON_DOCKER); the whole suite with FLYWHEEL_REAL_REPOS=all (23 rows: about
# 25 minutes of test time on 2 cores).
EVERY_ROW = os.environ.get("FLYWHEEL_REAL_REPOS") == "all"
SAMPLE = ("pyparsing__pyparsing-3.1.3", "more-itertools__more-itertools-10.1.0", "pallets__click-8.1.4",
          "pallets__jinja2-3.1.4", "pallets__markupsafe-2.1.5", "jquast__wcwidth-0.2.13")
ON_DOCKER = ("pallets__click-8.1.4", "jquast__wcwidth-0.2.13")
SCORED = IDS if EVERY_ROW else [i for i in IDS if i in SAMPLE]
SWEBENCH_FIELDS = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",
                   "hints_text", "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS",
                   "environment_setup_commit")
LARGE = 64 * 1024


def snapshot(row) -> dict[str, int]:
    """path -> size of the row's snapshot archive (below its top folder)."""
    with tarfile.open(SUITE / "repos" / f"{row['instance_id']}.tar.gz") as tar:
        return {m.name.split("/", 1)[1]: m.size for m in tar.getmembers() if m.isfile()}


def edited(patch: str) -> list[str]:
    return [line[6:] for line in patch.splitlines() if line.startswith("+++ b/")]


def test_the_suite_is_swebench_rows_of_real_packages_with_both_layouts_and_large_files():
    assert len(ROWS) >= 20 and len(set(IDS)) == len(IDS)
    assert len({r["repo"] for r in ROWS}) >= 6
    layouts, largest = set(), 0
    for row in ROWS:
        assert set(SWEBENCH_FIELDS) <= set(row), row["instance_id"]
        for field in ("FAIL_TO_PASS", "PASS_TO_PASS"):  # JSON text, as SWE-bench publishes them
            assert isinstance(row[field], str) and isinstance(json.loads(row[field]), list)
        assert json.loads(row["FAIL_TO_PASS"]), row["instance_id"]
        files = snapshot(row)
        created = set(re.findall(r"^--- /dev/null\n\+\+\+ b/(.+)$", row["patch"], re.M))
        assert all(p in files for p in edited(row["patch"]) if p not in created), row["instance_id"]
        layouts.add("src" if any(p.startswith("src/") for p in files) else "flat")
        largest = max([largest] + [files.get(p, 0) for p in edited(row["patch"])])
    assert layouts == {"src", "flat"} and largest > LARGE
    size = sum(f.stat().st_size for f in SUITE.rglob("*") if f.is_file())
    assert size < 8 << 20, f"bench/real_repos holds {size} bytes"


# -- scored in the sandbox (slow: a real package's tests, several runs per row) ------------------
@pytest.fixture(scope="module")
def real_envs():
    """$FLYWHEEL_ENVIRONMENTS with the suite's environments, built by `flywheel env build` from
    bench/real_repos/wheels alone (offline), and a snapshot store of the module's own. Under
    /tmp: the sandbox's uid must reach it."""
    from tests.families.conftest import environments_root
    root = Path(tempfile.mkdtemp(prefix="flywheel-real-envs-"))
    os.chmod(root, 0o755)
    try:
        with environments_root(root, FLYWHEEL_SNAPSHOT_STORE=root / "store"):
            for requirements in sorted((SUITE / "requirements").glob("*.txt")):
                assert cli_main.main(["env", "build", requirements.stem, "--requirements",
                                      str(requirements), "--wheelhouse", str(SUITE / "wheels")]) == 0
            yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def scored_file(tmp_path_factory) -> Path:
    """tasks.jsonl itself, or (without FLYWHEEL_REAL_REPOS=all) a file of the SAMPLE rows with
    their snapshots beside it, as a user keeps them."""
    return TASKS if EVERY_ROW else rows_file(tmp_path_factory, SCORED)


def rows_file(tmp_path_factory, ids) -> Path:
    """A tasks.jsonl of the rows `ids`, their snapshots beside it in repos/."""
    folder = tmp_path_factory.mktemp("real-repos")
    (folder / "repos").mkdir()
    for i in ids:
        shutil.copy(SUITE / "repos" / f"{i}.tar.gz", folder / "repos" / f"{i}.tar.gz")
    (folder / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS if r["instance_id"] in ids))
    return folder / "tasks.jsonl"


def on_backend(backend: str) -> list[str]:
    """The rows a test runs on `backend`: every scored row on local, ON_DOCKER's in a container
    (one row per layout, the large table file among them: what a container changes is where
    the files and processes are, not how a row is graded); FLYWHEEL_REAL_REPOS=all: every row."""
    return SCORED if backend == "local" or EVERY_ROW else [i for i in SCORED if i in ON_DOCKER]


@pytest.fixture(scope="module")
def tasks(real_envs, scored_file):
    """instance_id -> the prepared task, read from the rows' file as any SWE-bench file is read."""
    read = {}
    for number, row, problem, fmt in task_rows(str(scored_file), scored_file.read_bytes()):
        assert problem is None and fmt == "swebench", (number, problem)
        task, problems = prepare_task(row)
        assert problems == [], (task["task_id"], problems)
        read[task["task_id"]] = task
    return read


def wrong_fix(task) -> str:
    """A plausible wrong fix: the first file the gold patch edits, touched at its first hunk
    (a comment where the fix goes) and nothing fixed."""
    from flywheel.families.repository.repo import snapshot_files
    from flywheel.families.repository.unified_diff import make_diff
    files = snapshot_files(task)
    path = edited(task["reference_patch"])[0]
    start = int(re.search(r"^@@ -(\d+)", task["reference_patch"], re.M).group(1))
    lines = files[path].splitlines(keepends=True)
    lines.insert(min(start, len(lines)), "# handle the case the issue reports\n")
    return make_diff(files, {path: "".join(lines)})


def edited_test_file(task) -> tuple[str, str]:
    """(path, text) of the first test file the test_patch touches, as it is in the snapshot,
    with a comment added: SWE-bench puts it back before the test_patch, so beside the gold
    patch it changes nothing."""
    from flywheel.families.repository.repo import snapshot_files
    files = snapshot_files(task)
    path = next(p for p in edited(task["test_patch"]) if p in files)
    return path, files[path] + "\n# reviewed\n"


FORCE_PASS = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
              "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
              "    outcome.get_result().outcome = 'passed'\n")


def hacked_tests(task) -> dict[str, str]:
    """No fix; the test file the test_patch touches emptied and a conftest.py beside it that
    reports every test as passed: the test-editing hack."""
    path = edited(task["test_patch"])[0]
    return {path: "def test_nothing():\n    pass\n",
            os.path.join(os.path.dirname(path), "conftest.py"): FORCE_PASS}


def extra_test(task) -> tuple[str, str]:
    folder = os.path.dirname(edited(task["test_patch"])[0])
    return f"{folder}/test_repro_extra.py", "def test_reproduces():\n    assert 1 + 1 == 2\n"


@pytest.mark.slow
@pytest.mark.parametrize("instance_id", SCORED)
def test_gold_scores_1_and_nothing_a_wrong_fix_or_test_edits_0(instance_id, tasks, repo_sandbox, request):
    from flywheel.families.repository.repo import snapshot_files
    if instance_id not in on_backend(request.node.callspec.params["repo_sandbox"]):
        pytest.skip("on docker the test suite scores ON_DOCKER's rows; FLYWHEEL_REAL_REPOS=all scores every one")
    from flywheel.families.repository.unified_diff import apply_diff, make_diff
    task = tasks[instance_id]
    domain, verify = get_domain(task["domain"]), get_verifier("repo_tests")
    files = snapshot_files(task)
    fix = apply_diff(files, task["reference_patch"])  # path -> text (None: deleted)
    test_path, test_text = edited_test_file(task)
    extra_path, extra_text = extra_test(task)
    answers = {"gold": (task["reference_patch"], 1.0), "empty": ("", 0.0),
               "wrong fix": (wrong_fix(task), 0.0),
               "test edits instead of a fix": (make_diff(files, hacked_tests(task)), 0.0),
               "gold and a test edited": (make_diff(files, {**fix, test_path: test_text}), 1.0),
               "gold and a new test file": (make_diff(files, {**fix, extra_path: extra_text}), 1.0)}
    def outcome(name):
        answer, want = answers[name]
        verdict = verify(task, answer, domain.run(repo_sandbox, task, answer))
        return verdict.reward, verdict.detail[:300] if verdict.reward != want else ""

    got = dict(zip(answers, concurrently(outcome, list(answers))))
    assert got == {name: (want, "") for name, (_, want) in answers.items()}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
def test_tasks_validate_is_clean(backend, real_envs, scored_file, capsys, request, monkeypatch,
                                tmp_path_factory):
    rows = on_backend(backend)
    if backend == "docker":
        use_private_dockerd(request, monkeypatch)
    file = scored_file if rows == SCORED else rows_file(tmp_path_factory, rows)
    code = cli_main.main(["tasks", "validate", str(file), "--sandbox", backend])
    out = capsys.readouterr().out
    assert code == 0 and f"{len(rows)} valid tasks, 0 problems" in out, out[-3000:]


ACTION_CHARS = 60_000  # an action holds at most 64,000 characters


def patch_parts(patch: str) -> list[str]:
    """The gold patch as diffs of at most ACTION_CHARS each: whole files together where they
    fit, a larger file's hunks in turns under its header (later hunks found at their offset)."""
    pieces = []
    for block in re.split(r"(?m)^(?=diff --git )", patch):
        if not block:
            continue
        head, *hunks = re.split(r"(?m)^(?=@@ )", block)
        if len(block) <= ACTION_CHARS or not hunks:
            pieces.append(block)
            continue
        part = head
        for hunk in hunks:
            if len(part) + len(hunk) > ACTION_CHARS and part != head:
                pieces.append(part)
                part = head
            part += hunk
        pieces.append(part)
    parts = [""]
    for piece in pieces:
        if parts[-1] and len(parts[-1]) + len(piece) > ACTION_CHARS:
            parts.append("")
        parts[-1] += piece
    return parts


def use_private_dockerd(request, monkeypatch):
    """DOCKER_HOST at the session's private dockerd, its sandbox image built (as the backend
    builds it on first use: `flywheel run` and `validate` take the image as given)."""
    daemon = request.getfixturevalue("docker_daemon")
    daemon.backend().close()
    monkeypatch.setenv("DOCKER_HOST", daemon.url)


def golden_actions(task) -> list[str]:
    """read, search, edit, run the tests, submit: the gold patch applied by a scripted episode."""
    path = edited(task["reference_patch"])[0]
    start = int(re.search(r"^@@ -(\d+)", task["reference_patch"], re.M).group(1))
    word = re.search(r"^-\s*(?:def |class )?(\w{4,})", task["reference_patch"], re.M)
    word = word.group(1) if word else os.path.splitext(os.path.basename(path))[0]
    regression = [c["pytest"] for c in task["regression_tests"]][:3]
    calls = [ToolCall("search", {"pattern": re.escape(word), "path": os.path.dirname(path) or "."}),
             ToolCall("read_file", {"path": path, "start": start, "end": start + 40}),
             *[ToolCall("apply_patch", {"patch": part}) for part in patch_parts(task["reference_patch"])],
             ToolCall("run_shell", {"command": "python -m pytest -q -p no:cacheprovider "
                                               + " ".join(f"'{n}'" for n in regression)}),
             ToolCall("submit_changes", {})]
    return [render_call(c) for c in calls]


NATIVE = ("task_id", "domain", "prompt", "repo", "hidden_tests", "regression_tests", "test_patch",
          "reference_patch", "environment", "limits")


def native_rows(tasks, actions) -> str:
    """The prepared tasks as native repo rows (their snapshots by digest, from the store the
    SWE-bench reader filled), each with room for its longest scripted action: the repo domain
    gives an action 512 tokens and the SWE-bench reader keeps no `max_new_tokens`, so a real
    gold patch (1 to 82 KB) cannot be written in one action of a SWE-bench row."""
    return "".join(json.dumps({**{k: t[k] for k in NATIVE if k in t},
                               "repo": {k: t["repo"][k] for k in ("snapshot", "file_count")},
                               "max_new_tokens": max(map(len, actions[t["task_id"]])) + 64}) + "\n"
                   for t in tasks.values())


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
def test_golden_trajectories_solve_every_row_through_flywheel_run(backend, tasks, tmp_path, request,
                                                                  monkeypatch):
    from flywheel.settings.layout import RunLayout
    if backend == "docker":
        use_private_dockerd(request, monkeypatch)
    rows = on_backend(backend)
    tasks = {i: t for i, t in tasks.items() if i in rows}
    actions = {i: golden_actions(t) for i, t in tasks.items()}
    script, rows = tmp_path / "script.jsonl", tmp_path / "tasks.jsonl"
    script.write_text("".join(json.dumps({"prompt": t["prompt"], "actions": actions[i]}) + "\n"
                              for i, t in tasks.items()))
    rows.write_text(native_rows(tasks, actions))
    assert cli_main.main(["run", "--run-dir", str(tmp_path / "run"), "--tasks", str(rows),
                          "--policy", "scripted", "--set", f"policy.options=script={script}",
                          "--sandbox", backend, "--iterations", "1", "--n-samples", "1",
                          "--tasks-per-domain", str(len(tasks)), "--heldout-per-domain", "0",
                          "--max-turns", "8", "--eval-every", "0"]) == 0
    trajectories = RunLayout(str(tmp_path / "run")).read_table("trajectories").to_pylist()
    got = {r["task_id"]: (r["reward_raw"], r["episode_end"]) for r in trajectories}
    assert got == {i: (1.0, "submitted") for i in tasks}
