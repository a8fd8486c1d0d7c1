"""Scoring side of the repository harness (families/repository/harnesses/repo.py loads it, after registering
itself as `harness`): the `score` mode and the children it starts.

- `score`: apply the answer (a unified diff, its paths normalized by unified_diff.py) to the
  snapshot, put the whole TEST TREE back as the snapshot has it (`in_test_tree`: helpers, data,
  fixtures and every conftest.py included; a file the response added there is removed, so it
  takes no part), apply the task's `test_patch`, and evaluate the task's checks in children.
  Editing a test-tree file the snapshot or the test_patch has, or adding a conftest.py, is
  flagged (`tampered`); new test files, data and reproduction scripts are allowed, as SWE-bench
  allows them, and simply take no part (`ignored`).
  Module checks: the child gets each check's module and expression, never its expected value:
  it sends back the value as JSON text and this parent compares. Pytest checks: pytest_run.py
  (its own configuration, its signed record, SWE-bench's grading). Around the runs, the test
  tree's stat keys (ctime cannot be set back) are compared: a test-tree file written, added or
  removed by the code under test is tampering;
- `checks`: the checks' evaluator child (the visible tests' runner is visible_tests.py).

Standard library only.
"""

import fnmatch
import importlib.machinery
import json
import os
import select
import signal
import subprocess
import sys
import time

h = sys.modules["harness"]  # the tree, its paths and the logged runs (repo.py)
TEST_DIRS = {"test", "tests"}
TESTING_ROOTS = set()  # `testing` folders that hold tests in the snapshot (see testing_roots)


def in_test_tree(rel):
    """Whether normalized repository path `rel` belongs to the test tree: a folder on its way is
    named test or tests (any case; `src/pkg/tests/data/x.json` too) or is a `testing` folder that
    holds tests in the snapshot (pytest's own `testing/`; never `numpy/testing`, a library), or
    it is a conftest.py anywhere, or a test module (`test_*.py`, `*_test.py`) anywhere. A rule,
    not a list of patterns: whatever a repository keeps beside its tests is covered."""
    parts = rel.split("/")
    name = parts[-1]
    return (any(p.lower() in TEST_DIRS or (p.lower() == "testing" and "/".join(parts[:i + 1]) in TESTING_ROOTS)
                for i, p in enumerate(parts[:-1]))
            or name == "conftest.py" or is_test_module(name))


def is_test_module(name):
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def testing_roots(paths):
    """The `testing` folders of `paths` (the snapshot's files) that directly hold a test module or
    a conftest.py, with no test/tests folder between: a test folder by what it holds."""
    roots = set()
    for rel in paths:
        parts = rel.split("/")
        if len(parts) < 2 or not (parts[-1] == "conftest.py" or is_test_module(parts[-1])):
            continue
        for i in range(len(parts) - 2, -1, -1):
            low = parts[i].lower()
            if low in TEST_DIRS:
                break
            if low == "testing":
                roots.add("/".join(parts[:i + 1]))
                break
    return roots


def protected(rel, patterns):
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p) for p in patterns)


def witness(guarded):
    """{path: stat key} of every guarded file and of every folder inside a test folder: what a
    write, an addition or a removal there changes (a restored file keeps its new ctime)."""
    seen = {}
    for here, dirs, names in os.walk(h.REPO, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in h.SKIP_DIRS)
        rel_dir = os.path.relpath(here, h.REPO)
        if rel_dir != "." and in_test_tree(rel_dir + "/_"):
            st = os.lstat(here)
            seen[rel_dir + "/"] = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        for name in names:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if guarded(rel) and not name.endswith((".pyc", ".pyo")):
                try:
                    seen[rel] = h.stat_key(os.lstat(os.path.join(here, name)))
                except OSError:
                    pass
    return seen


def score(plan, known=None):
    ud = h.load_unified_diff()
    pytest_run = h.load_sibling("pytest_run")
    try:
        test_paths = set(ud.changed_paths(plan.get("test_patch") or ""))
    except (ValueError, TypeError) as e:
        return {"applied": False, "test_patch_error": f"the task's test_patch: {e}"[:600]}
    guarded = lambda rel: (in_test_tree(rel) or rel in test_paths  # noqa: E731
                           or protected(rel, plan.get("protected") or ()))
    # The repository's package must import at the snapshot, else no answer can pass; probed
    # before the walk, so whatever importing it writes is never taken for the answer's.
    began = time.monotonic()
    broken = h.load_sibling("import_check").import_problem(plan["budget_s"] * 0.5)
    if broken:
        return {"applied": False, "install_error": broken}
    plan["budget_s"] -= time.monotonic() - began
    before = h.walk(h.REPO, known)
    TESTING_ROOTS.clear()
    TESTING_ROOTS.update(testing_roots([*(rel for rel, entry in before.items() if entry[0] == "file"),
                                        *test_paths]))
    config = pytest_run.pristine_config(h.REPO)  # before the answer: its configuration never counts
    chain = h.load_sibling("apply_chain")
    pristine = chain.Pristine(plan, before)
    problem, applier = chain.apply_answer(ud, plan, known, pristine)
    if problem:
        return {"applied": False, "error": problem[-600:], "applier": applier}
    after = h.walk(h.REPO, known)
    changes = sorted(rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel))
    odd = [rel for rel in changes if rel in after and after[rel][0] != "file"]
    if odd:
        return {"applied": False, "applier": applier,
                "error": f"the diff makes {odd[0]!r} a symbolic link or a special file (only files are scored)"}
    for rel in changes:  # the checks run on the pristine test tree, never the model's
        if guarded(rel):
            pristine.restore(rel)
    tampered = sorted(rel for rel in changes if guarded(rel) and (  # edits put back: a flag, no penalty
        rel in before or rel in test_paths or rel.rsplit("/", 1)[-1] == "conftest.py"
        or protected(rel, plan.get("protected") or ())))
    ignored = sorted(rel for rel in changes if guarded(rel) and rel not in tampered)
    problem = apply_test_patch(ud, plan.get("test_patch") or "")
    if problem:
        return {"applied": True, "changed": changes, "tampered": tampered, "applier": applier,
                "test_patch_error": problem}
    if test_paths & set(pytest_run.CONFIG_FILES):
        config = pytest_run.pristine_config(h.REPO)  # the task's own configuration changes
    allowed = {os.path.realpath(os.path.join(h.REPO, rel)) for rel, entry in h.walk(h.REPO).items()
               if entry[0] == "file" and rel.endswith(".py") and (rel not in changes or guarded(rel))}
    baseline = witness(guarded)
    start = time.monotonic()
    module_checks = [c for c in plan["checks"] if "pytest" not in c]
    pytest_checks = [c for c in plan["checks"] if "pytest" in c]
    share = 0.25 if pytest_checks else 0.6
    results, exited = evaluate(module_checks, plan["budget_s"] * share) if module_checks else ({}, False)
    report = {"applied": True, "changed": changes, "tampered": tampered, "ignored": ignored, "applier": applier}
    if pytest_checks:
        left = plan["budget_s"] * 0.85 - (time.monotonic() - start)
        outcomes, ran = run_pytest(pytest_run, pytest_checks, left, config, allowed)
        results.update(outcomes)
        if not plan.get("test_log"):
            ran.pop("test_log", None)
        report.update(ran)
        exited = exited or ran.get("exited_early", False)
    after = witness(guarded)
    moved = sorted(k for k in set(baseline) | set(after) if baseline.get(k) != after.get(k))
    if moved:
        report["tampered_pytest"] = [*report.get("tampered_pytest", []),
                                     "the test tree changed while the checks ran: " + ", ".join(moved[:8])]
    report.update(checks=results, exited_early=exited)
    if plan.get("visible_tests"):  # what the model could see pass: special-casing shows here
        left = plan["budget_s"] - (time.monotonic() - start)
        report["visible"] = h.visible_counts(plan["visible_tests"], left, 4000)[2]
    return report


def apply_test_patch(ud, patch):
    """Apply the task's test_patch to the (restored) tree; why it does not apply, or None."""
    if not patch.strip():
        return None
    try:
        h.load_sibling("apply_chain").apply_own(ud, patch)
    except (ValueError, TypeError, OSError) as e:
        return f"the task's test_patch does not apply: {e}"[:600]
    return None


def pytest_found():
    """Whether the children can import pytest (the environment, then the sandbox's own Python),
    decided here, by path alone: nothing of the repository runs and no file of it counts."""
    return importlib.machinery.PathFinder.find_spec("pytest", h.env_paths() + sys.path[1:]) is not None


def run_pytest(pytest_run, checks, budget_s, config, allowed):
    """({check id: {"ok", "why"}}, facts for the report) for checks {"id", "pytest": NODEID,
    "group"}: one trusted pytest child (pytest_run.py)."""
    if not pytest_found():
        why = "pytest is not importable in the sandbox: the task's environment has no pytest"
        return {c["id"]: {"ok": False, "why": why} for c in checks}, {"pytest_missing": True}
    final, facts = pytest_run.run([c["pytest"] for c in checks], budget_s, config, allowed)
    return pytest_run.grade(checks, final, facts), facts


def evaluate(checks, budget_s):
    """{check id: {"ok": bool, "why": str}} and whether the child ended before answering all."""
    child = subprocess.Popen([sys.executable, "-I", "-B", os.path.join(h.HERE, "harness.py"), "checks"],
                             cwd=h.REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)
    asked = [{"id": c["id"], "module": c["module"], "call": c["call"]} for c in checks]
    try:
        child.stdin.write((json.dumps(asked) + "\n").encode())
        child.stdin.close()
    except OSError:
        pass
    answers, exited = read_answers(child, time.monotonic() + budget_s, len(checks))
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass
    child.wait()
    results = {}
    for check in checks:
        got = answers.get(check["id"])
        if got is None:
            results[check["id"]] = {"ok": False, "why": "no answer (the process ended or ran out of time)"}
        elif "raise" in got:
            results[check["id"]] = {"ok": False, "why": f"raised {got['raise']}: {got.get('message', '')}"[:300]}
        else:
            ok = canonical_text(got.get("value")) == json.dumps(check["expect"], sort_keys=True)
            results[check["id"]] = {"ok": ok, "why": "" if ok else
                                    f"got {str(got.get('value'))[:120]}, want {json.dumps(check['expect'])[:120]}"}
    return results, exited


def canonical_text(text):
    try:
        return json.dumps(json.loads(text), sort_keys=True) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None


def read_answers(child, deadline, count):
    """The child's answers, one JSON line each, until it has sent `count` or the time is up."""
    answers, buffer, exited = {}, b"", False
    fd = child.stdout.fileno()
    while len(answers) < count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        data = os.read(fd, 1 << 16)
        if not data:
            exited = True
            break
        buffer += data
        if len(buffer) > 1 << 24:
            break
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if isinstance(answer, dict) and isinstance(answer.get("id"), str):
                if answer.get("exit"):
                    exited = True
                answers.setdefault(answer["id"], answer)
    return answers, exited


# ---------------------------------------------------------------- the children
def serve_checks():
    """Evaluate each check's expression in its module; send the value as JSON text, one line each."""
    out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    checks = json.loads(sys.stdin.readline())
    os.dup2(null, 0)
    os.dup2(null, 1)
    sys.path[:0] = h.env_paths() + [h.REPO]
    dumps = json.dumps

    def send(message):
        data = (dumps(message) + "\n").encode()
        while data:
            data = data[os.write(out, data):]

    for check in checks:
        try:
            module = importlib.import_module(check["module"])
            value = eval(check["call"], vars(module))  # noqa: S307  the task's own check
            text = dumps(value, sort_keys=True)
            send({"id": check["id"], "value": text})
        except SystemExit:
            send({"id": check["id"], "raise": "SystemExit", "message": "the code called exit", "exit": True})
        except BaseException as e:  # noqa: BLE001
            send({"id": check["id"], "raise": type(e).__name__, "message": str(e)[:200]})
