"""`flywheel env build` from a local wheelhouse (offline) and `flywheel tasks validate` running
repository tasks in the local sandbox: a good task file passes, a bad one says which check of
which task is wrong and why."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from flywheel.cli import main as cli_main
from flywheel.families.repository.unified_diff import make_diff

OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
FILES = {"calc/__init__.py": "", "calc/ops.py": OPS}


def write_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A minimal pure-Python wheel, as a build backend would write it."""
    info = f"{name}-{version}.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


@pytest.fixture
def empty_environments(monkeypatch):
    root = Path(tempfile.mkdtemp(prefix="flywheel-envs-test-"))
    os.chmod(root, 0o755)
    monkeypatch.setenv("FLYWHEEL_ENVIRONMENTS", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_env_build_from_a_wheelhouse_then_a_task_imports_it(empty_environments, tmp_path, capsys):
    (tmp_path / "wheels").mkdir()
    write_wheel(tmp_path / "wheels", "tinyhelper", "1.0", {"tinyhelper/__init__.py": "ANSWER = 42\n"})
    (tmp_path / "reqs.txt").write_text("tinyhelper==1.0\n")
    assert cli_main.main(["env", "build", "tiny", "--requirements", str(tmp_path / "reqs.txt"),
                          "--wheelhouse", str(tmp_path / "wheels")]) == 0
    assert f"built environment tiny in {empty_environments / 'tiny'}" in capsys.readouterr().out
    assert (empty_environments / "tiny" / "tinyhelper" / "__init__.py").read_text() == "ANSWER = 42\n"

    from flywheel.domains.registry import get_domain
    from flywheel.sandbox import get_backend
    from flywheel.verifiers import get_verifier
    domain = get_domain("repo")
    task = domain.normalize_task({
        "task_id": "uses-env", "domain": "repo", "prompt": "p", "environment": "tiny",
        "repo": {"files": {"calc/__init__.py": "", "calc/ops.py": "from tinyhelper import ANSWER\n"}},
        "hidden_tests": [{"id": "h", "module": "calc.ops", "call": "ANSWER", "expect": 42}]})
    assert domain.validate_task(task) == []
    with get_backend("local") as sandbox:
        verdict = get_verifier("repo_tests")(task, "", domain.run(sandbox, task, ""))
    assert verdict.reward == 1.0, verdict.detail


def test_env_build_failure_and_bad_names(empty_environments, tmp_path, capsys):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "reqs.txt").write_text("no-such-package-flywheel==1.0\n")
    assert cli_main.main(["env", "build", "x", "--requirements", str(tmp_path / "reqs.txt"),
                          "--wheelhouse", str(tmp_path / "wheels")]) == 1
    assert "pip failed" in capsys.readouterr().out
    assert cli_main.main(["env", "build", "../up", "--requirements", str(tmp_path / "reqs.txt")]) == 1
    assert "must be letters" in capsys.readouterr().out


def test_the_readme_documents_env_build():
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert "flywheel env build" in readme and "--wheelhouse" in readme


def test_tasks_validate_runs_repository_tasks(environments, calc_row, tmp_path, capsys):
    good = tmp_path / "good.jsonl"
    mixed = [{"id": "m1", "module": "calc.ops", "call": "total([2, 3])", "expect": 5}]
    good.write_text(json.dumps(calc_row(task_id="calc-good",
                                        hidden_tests=calc_row()["hidden_tests"] + mixed)) + "\n")
    assert cli_main.main(["tasks", "validate", str(good)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "[1/1] running calc-good in the sandbox" in out and "1 valid tasks, 0 problems" in out

    bad = tmp_path / "bad.jsonl"
    rows = [calc_row(task_id="already-passes",  # a hidden check the snapshot passes
                     hidden_tests=[{"id": "t2", "pytest": "tests/test_x.py::test_empty"}],
                     regression_tests=[]),
            calc_row(task_id="wrong-reference",  # a reference patch that fixes nothing
                     hidden_tests=calc_row()["hidden_tests"] + mixed,
                     reference_patch=make_diff(FILES, {"calc/ops.py": "# nothing\n" + OPS})),
            calc_row(task_id="no-such-env", environment="missing")]
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli_main.main(["tasks", "validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "task already-passes: the snapshot passes hidden check 't2'" in out
    assert ("task wrong-reference: the reference_patch fails hidden check "
            "'tests/test_x.py::test_total': failed") in out
    assert "task wrong-reference: the reference_patch fails hidden check 'm1': got -5, want 5" in out
    assert "line 3: field `environment`: no environment 'missing'" in out
    assert "2 valid tasks, 4 problems" in out


def test_the_cli_entry_point_knows_env():
    done = subprocess.run([sys.executable, "-m", "flywheel.cli.main", "env", "build", "--help"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "--wheelhouse" in done.stdout


def test_a_swebench_row_keeps_its_environment(tmp_path, monkeypatch):
    from flywheel.domains.task_files import task_rows
    monkeypatch.setenv("FLYWHEEL_SNAPSHOT_STORE", str(tmp_path / "store"))
    (tmp_path / "acme__calc-1" / "calc").mkdir(parents=True)
    (tmp_path / "acme__calc-1" / "calc" / "ops.py").write_text(OPS)
    row = {"instance_id": "acme__calc-1", "problem_statement": "total() subtracts.",
           "FAIL_TO_PASS": ["tests/test_x.py::test_total"], "PASS_TO_PASS": [],
           "environment": "swe-py311"}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(row) + "\n")
    [(_, task, problem, fmt)] = list(task_rows(str(path), path.read_bytes()))
    assert (problem, fmt, task["environment"]) == (None, "swebench", "swe-py311")
