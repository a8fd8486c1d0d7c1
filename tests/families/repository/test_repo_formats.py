"""Repository tasks from files: SWE-bench rows read on sight with their snapshot beside the task
file, and native rows naming a folder, both turned into stored snapshots the repo domain runs."""

import io
import json
import tarfile

import pytest

from flywheel.domains.registry import get_domain, prepare_task
from flywheel.families.repository.repo import snapshot_files
from flywheel.domains.task_files import task_rows
from flywheel.families.repository.unified_diff import make_diff
from flywheel.verifiers import get_verifier

OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
FIXED = OPS.replace("s -= x", "s += x")
FILES = {"calc/__init__.py": "", "calc/ops.py": OPS,
         "tests/test_ops.py": "from calc.ops import total\n\n\ndef test_total():\n    assert total([4, 5]) == 9\n"}
INSTANCE = "acme__calc-42"
ROW = {
    "instance_id": INSTANCE, "repo": "acme/calc", "base_commit": "3f2a1c9",
    "problem_statement": "total() subtracts instead of adding.",
    "hints_text": "look at the loop in ops.py",
    "patch": make_diff(FILES, {"calc/ops.py": FIXED}),
    "test_patch": "--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n",
    "FAIL_TO_PASS": json.dumps(["tests/test_ops.py::test_total"]),  # as the HF dataset stores it
    "PASS_TO_PASS": [],
    "version": "1.0", "environment_setup_commit": "3f2a1c9", "created_at": "2024-01-01",
}


@pytest.fixture(autouse=True)
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("FLYWHEEL_SNAPSHOT_STORE", str(tmp_path / "store"))
    return str(tmp_path / "store")


def github_archive(path, files, top=f"calc-{'3f2a1c9'}"):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))


def read(folder, *rows):
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return list(task_rows(str(path), path.read_bytes()))


def test_a_swebench_row_is_read_on_sight_with_its_archive_beside_it(tmp_path, store):
    github_archive(tmp_path / f"{INSTANCE}.tar.gz", FILES)
    [(number, row, problem, fmt)] = read(tmp_path, ROW)
    assert (number, problem, fmt, row["domain"]) == (1, None, "swebench", "repo")
    assert row["task_id"] == INSTANCE and row["prompt"] == ROW["problem_statement"]
    assert "loop in ops.py" not in row["prompt"]
    assert row["hidden_tests"] == [{"id": "tests/test_ops.py::test_total", "pytest": "tests/test_ops.py::test_total"}]
    assert row["regression_tests"] == []
    assert (row["github_repo"], row["base_commit"], row["version"]) == ("acme/calc", "3f2a1c9", "1.0")
    assert row["reference_patch"] == ROW["patch"] and row["test_patch"] == ROW["test_patch"]
    [(_, kept, _, _)] = read(tmp_path, {**ROW, "max_new_tokens": 30000})
    assert kept["max_new_tokens"] == 30000  # a whole gold patch in one action

    task, problems = prepare_task(row)
    assert problems == []
    assert "_folder" not in task and task["answer"] == ROW["patch"]
    assert set(task["repo"]) == {"snapshot", "store", "file_count"}
    assert task["repo"]["store"] == store and task["repo"]["file_count"] == 3
    assert snapshot_files(task) == FILES


def test_a_folder_under_repos_is_found_too(tmp_path):
    for name, text in FILES.items():
        (tmp_path / "repos" / INSTANCE / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repos" / INSTANCE / name).write_text(text)
    [(_, row, problem, _)] = read(tmp_path, ROW)
    assert problem is None and row["repo"] == {"path": f"repos/{INSTANCE}"}
    assert snapshot_files(prepare_task(row)[0]) == FILES


def test_a_missing_snapshot_names_the_paths_looked_for(tmp_path):
    [(_, row, problem, fmt)] = read(tmp_path, ROW)
    assert row is None and fmt == "swebench"
    assert problem.startswith("SWE-bench format: ")
    for looked in (INSTANCE, f"{INSTANCE}.tar.gz", f"{INSTANCE}.tgz", f"{INSTANCE}.zip",
                   f"repos/{INSTANCE}.tar.gz"):
        assert str(tmp_path / looked) in problem
    assert "need the repository snapshot locally" in problem


def test_repo_path_must_stay_inside_the_task_files_folder(tmp_path):
    (tmp_path / "tasks").mkdir()
    github_archive(tmp_path / "outside.tar.gz", FILES)
    [(_, row, problem, _)] = read(tmp_path / "tasks", {**ROW, "repo_path": "../outside.tar.gz"})
    assert row is None and "field `repo_path`" in problem and "leads out" in problem


def test_bad_test_lists_say_which_field(tmp_path):
    github_archive(tmp_path / f"{INSTANCE}.tar.gz", FILES)
    [(_, row, problem, _)] = read(tmp_path, {**ROW, "FAIL_TO_PASS": "not json"})
    assert row is None and "field `FAIL_TO_PASS`" in problem


def test_a_native_row_naming_a_folder_scores_from_the_store(tmp_path, monkeypatch, sandbox):
    for name, text in FILES.items():
        (tmp_path / "calc-repo" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "calc-repo" / name).write_text(text)
    monkeypatch.chdir(tmp_path)  # a row that no format reader placed is relative to the cwd
    task, problems = prepare_task({
        "task_id": "calc-1", "domain": "repo", "prompt": "total() is wrong", "repo": "calc-repo",
        "visible_tests": ["tests/test_ops.py"],
        "hidden_tests": [{"id": "h1", "module": "calc.ops", "call": "total([5, 6, 7])", "expect": 18}]})
    assert problems == [] and task["repo"]["file_count"] == 3
    domain = get_domain("repo")
    for response, reward in [(make_diff(FILES, {"calc/ops.py": FIXED}), 1.0), ("", 0.0)]:
        verdict = get_verifier(domain.verifier)(task, response, domain.run(sandbox, task, response))
        assert verdict.reward == reward

    assert prepare_task({**task, "visible_tests": ["tests/nope.py"]})[1] == [
        "field `visible_tests`: 'tests/nope.py' is not in the snapshot"]
    assert prepare_task({**task, "visible_tests": [["tests/test_ops.py"]]})[1] == [
        "field `visible_tests`: \"['tests/test_ops.py']\" is not a path (text)"]
    assert prepare_task({**task, "visible_tests": "tests/test_ops.py"})[1] == [
        "field `visible_tests` must be a list of the snapshot's test files"]
    gone = {**task, "repo": {**task["repo"], "snapshot": "sha256:" + "0" * 64}}
    assert any("field `repo.snapshot`" in p for p in prepare_task(gone)[1])
    _, problems = prepare_task({**task, "repo": {"path": "../elsewhere"}})
    assert any("leads out" in p for p in problems)


def test_checks_are_module_calls_or_pytest_node_ids():
    domain = get_domain("repo")
    task = domain.normalize_task({"task_id": "t", "prompt": "p", "repo": {"files": FILES},
                                  "hidden_tests": [{"id": "a", "pytest": "tests/test_ops.py::test_total"},
                                                   {"id": "b", "pytest": "x"}, {"pytest": "y"},
                                                   {"id": "c", "module": "calc.ops"}]})
    problems = domain.validate_task(task)
    assert problems == ["field `hidden_tests[2]` lacks id", "field `hidden_tests[3]` lacks call, expect"]
