"""repo_suite: every generated task is checked against its real code, run in a subprocess.

For each seeded task: hidden checks fail on the buggy tree and pass on the fixed one, regression
checks pass on both, the visible tests fail somewhere on buggy and nowhere on fixed, and the
golden edit_file calls turn the buggy file into fixed_files exactly.
"""

import json
import random
import subprocess
import sys
from collections import Counter

import pytest

from flywheel.families.repository.repo_suite import KINDS, build_task

# Runs in the task's root: evaluates checks in their modules and the visible test functions.
RUNNER = r"""
import importlib, json, runpy, sys
sys.path.insert(0, ".")
spec = json.load(sys.stdin)
out = {"checks": {}, "test_failures": 0, "tests_run": 0}
for c in spec["checks"]:
    try:
        value = eval(c["call"], vars(importlib.import_module(c["module"])))
        out["checks"][c["id"]] = json.loads(json.dumps(value)) == c["expect"]
    except Exception as exc:
        out["checks"][c["id"]] = False
for path in spec["tests"]:
    try:
        namespace = runpy.run_path(path)
    except Exception:
        out["test_failures"] += 1
        continue
    for name, fn in sorted(namespace.items()):
        if name.startswith("test_") and callable(fn):
            out["tests_run"] += 1
            try:
                fn()
            except Exception:
                out["test_failures"] += 1
print(json.dumps(out))
"""

SEEDS = range(60)


def run_tree(root, files, checks, tests):
    """Write `files` under `root` and run the checks and visible tests there in one process."""
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    spec = json.dumps({"checks": checks, "tests": tests})
    done = subprocess.run([sys.executable, "-c", RUNNER], input=spec, cwd=root,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def apply_golden(files, golden):
    """The files after the golden edit_file calls; each `old` must occur once when applied."""
    files = dict(files)
    for call in golden:
        if call["name"] == "edit_file":
            args = call["arguments"]
            assert files[args["path"]].count(args["old"]) == 1, args
            files[args["path"]] = files[args["path"]].replace(args["old"], args["new"])
    return files


@pytest.fixture(scope="module")
def tasks():
    return [build_task(random.Random(seed)) for seed in SEEDS]


def test_shape_and_json(tasks):
    for task in tasks:
        assert json.loads(json.dumps(task)) == task
        files = task["repo"]["files"]
        pkg = task["package"]
        modules = [p for p in files if p.startswith(f"{pkg}/") and p.endswith(".py")]
        assert 3 <= len(modules) <= 10
        assert all(text.endswith("\n") for text in files.values())
        assert set(task["fixed_files"]) <= set(files)
        assert task["visible_tests"] and set(task["visible_tests"]) <= set(files)
        assert len(task["hidden_tests"]) >= 2 and len(task["regression_tests"]) >= 3
        assert len({c["module"] for c in task["regression_tests"]}) >= 2
        ids = [c["id"] for c in task["hidden_tests"] + task["regression_tests"]]
        assert len(ids) == len(set(ids))
        assert task["kind"] in KINDS
        assert 1 <= task["prompt"].count(".") + task["prompt"].count(";") <= 6
        assert not any(path in task["prompt"] for path in task["fixed_files"])


def test_every_kind_at_least_three_times(tasks):
    counts = Counter(task["kind"] for task in tasks)
    assert set(counts) == set(KINDS)
    assert min(counts.values()) >= 3, counts


def test_golden_edits_reproduce_the_fix(tasks):
    allowed = {"read_file", "search", "edit_file", "run_visible_tests", "submit_changes"}
    for task in tasks:
        golden = task["golden"]
        assert {c["name"] for c in golden} <= allowed
        assert golden[-2:] == [{"name": "run_visible_tests", "arguments": {}},
                               {"name": "submit_changes", "arguments": {}}]
        after = apply_golden(task["repo"]["files"], golden)
        for path, text in task["fixed_files"].items():
            assert after[path] == text
            assert task["repo"]["files"][path] != text
        assert after == {**task["repo"]["files"], **task["fixed_files"]}


@pytest.mark.slow  # 60 packages' checks and tests in subprocesses (the golden test covers a few quickly)
def test_checks_and_visible_tests_run_for_real(tasks, tmp_path):
    for n, task in enumerate(tasks):
        checks = task["hidden_tests"] + task["regression_tests"]
        buggy = run_tree(tmp_path / f"b{n}", task["repo"]["files"], checks, task["visible_tests"])
        fixed_files = {**task["repo"]["files"], **task["fixed_files"]}
        fixed = run_tree(tmp_path / f"f{n}", fixed_files, checks, task["visible_tests"])
        where = (n, task["kind"], task["package"])
        for c in task["hidden_tests"]:
            assert not buggy["checks"][c["id"]], (where, c)
            assert fixed["checks"][c["id"]], (where, c)
        for c in task["regression_tests"]:
            assert buggy["checks"][c["id"]] and fixed["checks"][c["id"]], (where, c)
        assert buggy["test_failures"] >= 1, where
        assert fixed["test_failures"] == 0 and fixed["tests_run"] >= 3, where


def test_hundreds_of_distinct_tasks():
    seen = set()
    for seed in range(300):
        task = build_task(random.Random(seed))
        seen.add(json.dumps([task["prompt"], task["repo"]], sort_keys=True))
    assert len(seen) >= 250, len(seen)


@pytest.mark.slow  # every defect site of every template, run
def test_every_template_and_site_is_sound(tmp_path):
    """Beyond the 60 seeds: each template's every site once, so no site goes untested."""
    from flywheel.families.repository.repo_suite import assemble
    from flywheel.families.repository.repo_templates import TEMPLATES

    for t, template in enumerate(TEMPLATES):
        package = template(random.Random(t))
        assert {site.kind for site in package.sites} == set(KINDS), template.__name__
        for s, site in enumerate(package.sites):
            task = assemble(package, site)
            checks = task["hidden_tests"] + task["regression_tests"]
            assert len(task["regression_tests"]) >= 3, (template.__name__, s)
            root = tmp_path / f"{t}_{s}"
            buggy = run_tree(root / "b", task["repo"]["files"], checks, task["visible_tests"])
            fixed = run_tree(root / "f", {**task["repo"]["files"], **task["fixed_files"]},
                             checks, task["visible_tests"])
            where = (template.__name__, site.kind, site.symbol)
            assert not any(buggy["checks"][c["id"]] for c in task["hidden_tests"]), where
            assert all(fixed["checks"].values()), (where, fixed["checks"])
            assert all(buggy["checks"][c["id"]] for c in task["regression_tests"]), where
            assert buggy["test_failures"] >= 1 and fixed["test_failures"] == 0, where
