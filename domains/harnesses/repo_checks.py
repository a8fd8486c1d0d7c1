"""Scoring side of the repository harness (domains/harnesses/repo.py loads it by path, after
registering itself as `harness`): the `score` mode and the children it starts.

- `score`: apply the answer (a unified diff) to the snapshot, put every protected file (tests,
  conftest.py, ...) back as it was, apply the task's `test_patch` (the pytest checks' files), and
  evaluate the task's hidden and regression checks in children. Module checks: the child gets each
  check's module and expression, never its expected value: it sends back the value as JSON text
  and this parent compares, so nothing the repository's code does can make a wrong value pass (an
  exit, a patched json, a forged line all leave checks unanswered). Pytest checks: pytest runs the
  node ids in a child writing a JUnit XML report outside the repository, which this parent reads;
  a node id missing from it fails, and no report at all (the process exited early) fails them all.
  Code running inside that pytest process could still rewrite its report deliberately: the
  protected files (conftest.py, pytest.ini, ...) close the easy doors, not that one;
- `checks` / `runtests`: the children (the checks' evaluator; the visible tests' runner).

Standard library only.
"""

import fnmatch
import importlib.machinery
import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ElementTree

h = sys.modules["harness"]  # the tree, its paths and the logged runs (repo.py)
JUNIT = os.path.join(h.HERE, ".flywheel", "junit.xml")
MAX_JUNIT = 1 << 23
# pytest is imported before the repository is on sys.path: a `pytest.py` of the model's never
# stands in for it. Node ids and the report's path come as arguments.
BOOTSTRAP = ("import os, sys\n"
             "env = [p for p in (%r,) if os.path.isdir(p)]\n"
             "sys.path[:0] = env\n"
             "import pytest\n"
             "sys.path.insert(len(env), os.getcwd())\n"
             "sys.exit(pytest.main(['-p', 'no:cacheprovider', '-q', '--junitxml=' + sys.argv[1], *sys.argv[2:]]))\n"
             % h.ENV)


def protected(rel, patterns):
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p) for p in patterns)


def score(plan, known=None):
    ud = h.load_unified_diff()
    try:
        test_paths = set(ud.changed_paths(plan.get("test_patch") or ""))
    except (ValueError, TypeError) as e:
        return {"applied": False, "test_patch_error": f"the task's test_patch: {e}"[:600]}
    guarded = lambda rel: protected(rel, plan["protected"]) or rel in test_paths  # noqa: E731
    pristine = {}
    for rel, entry in h.walk(h.REPO, known).items():
        if entry[0] == "file" and guarded(rel):
            pristine[rel] = h.read_text(os.path.join(h.REPO, rel), 1 << 24)[0]
    files = {}
    try:
        paths = ud.changed_paths(plan["patch"])
        for rel in paths:
            full = h.inside(rel)
            if os.path.isfile(full):
                files[rel] = h.read_text(full, 1 << 24)[0]
        changes = ud.apply_diff(files, plan["patch"])
    except (ValueError, TypeError) as e:
        return {"applied": False, "error": str(e)[:600]}
    for rel, text in changes.items():
        if text is None:
            os.unlink(h.inside(rel))
        else:
            h.write(h.inside(rel), text)
    tampered = sorted(rel for rel in changes if guarded(rel))
    for rel in tampered:  # the checks run on the pristine tests, never the model's
        if rel in pristine and pristine[rel] is not None:
            h.write(h.inside(rel), pristine[rel])
        elif os.path.lexists(h.inside(rel)):
            os.unlink(h.inside(rel))
    problem = apply_test_patch(ud, plan.get("test_patch") or "")
    if problem:
        return {"applied": True, "changed": sorted(changes), "tampered": tampered,
                "test_patch_error": problem}
    start = time.monotonic()
    module_checks = [c for c in plan["checks"] if "pytest" not in c]
    pytest_checks = [c for c in plan["checks"] if "pytest" in c]
    share = 0.25 if pytest_checks else 0.6
    results, exited = evaluate(module_checks, plan["budget_s"] * share) if module_checks else ({}, False)
    report = {"applied": True, "changed": sorted(changes), "tampered": tampered}
    if pytest_checks:
        left = plan["budget_s"] * 0.85 - (time.monotonic() - start)
        outcomes, ran = run_pytest(pytest_checks, left)
        results.update(outcomes)
        report.update(ran)
        exited = exited or ran.get("exited_early", False)
    report.update(checks=results, exited_early=exited)
    if plan.get("visible_tests"):  # what the model could see pass: special-casing shows here
        left = plan["budget_s"] - (time.monotonic() - start)
        _, out = h.run_logged([sys.executable, "-I", "-B", os.path.join(h.HERE, "harness.py"), "runtests",
                             *plan["visible_tests"]], left, 4000)
        counts = re.findall(r"^== (\d+) passed, (\d+) failed", out, re.M)
        report["visible"] = dict(zip(("passed", "failed"), map(int, counts[-1]))) if counts else None
    return report


def apply_test_patch(ud, patch):
    """Apply the task's test_patch to the (restored) tree; why it does not apply, or None."""
    if not patch.strip():
        return None
    try:
        files = {}
        for rel in ud.changed_paths(patch):
            full = h.inside(rel)
            if os.path.isfile(full):
                files[rel] = h.read_text(full, 1 << 24)[0]
        for rel, text in ud.apply_diff(files, patch).items():
            if text is None:
                os.unlink(h.inside(rel))
            else:
                h.write(h.inside(rel), text)
    except (ValueError, TypeError, OSError) as e:
        return f"the task's test_patch does not apply: {e}"[:600]
    return None


def pytest_found():
    """Whether the children can import pytest (the environment, then the sandbox's own Python),
    decided here, by path alone: nothing of the repository runs and no file of it counts."""
    return importlib.machinery.PathFinder.find_spec("pytest", h.env_paths() + sys.path[1:]) is not None


def run_pytest(checks, budget_s):
    """({check id: {"ok", "why"}}, facts for the report) for checks {"id", "pytest": NODEID}: one
    pytest child in the repository, its outcomes read from the JUnit XML it writes."""
    if not pytest_found():
        why = "pytest is not importable in the sandbox: the task's environment has no pytest"
        return {c["id"]: {"ok": False, "why": why} for c in checks}, {"pytest_missing": True}
    if os.path.lexists(JUNIT):
        os.unlink(JUNIT)
    nodes = list(dict.fromkeys(c["pytest"] for c in checks))
    code, out = h.run_logged([sys.executable, "-I", "-B", "-c", BOOTSTRAP, JUNIT, "--", *nodes],
                           budget_s, 1500)
    facts = {"pytest_exit": code, "pytest_output": out[-1500:]}
    cases = read_junit(JUNIT)
    if cases is None:
        # pytest itself writes its report on every ending but an interrupt, an internal error
        # or a usage error (2, 3, 4: a broken conftest, a bad node id); anything else is an exit
        # the code under test made
        stopped = code in (2, 3, 4)
        why = ("pytest ran out of time" if code is None else f"pytest stopped with exit {code}, "
               "without a report" if stopped else f"pytest wrote no report (exit {code}): the "
               "process exited early")
        facts["exited_early"] = code is not None and not stopped
        return {c["id"]: {"ok": False, "why": why} for c in checks}, facts
    results = {}
    for check in checks:
        outcome, message = cases.get(junit_key(check["pytest"]), ("missing", ""))
        why = {"passed": "", "missing": "not in pytest's report (not collected, or not run)",
               "skipped": f"skipped: {message}"}.get(outcome, f"{outcome}: {message}")
        results[check["id"]] = {"ok": outcome == "passed", "why": why[:300]}
    return results, facts


def junit_key(node_id):
    """(classname, name) pytest's JUnit report gives node `node_id` (its mangle_test_address)."""
    path, bracket, params = node_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def read_junit(path):
    """{(classname, name): (outcome, message)} from a JUnit XML report, or None when there is no
    readable report; an outcome is passed, failed, error or skipped (the worst of repeats)."""
    try:  # the child could have left a link or a FIFO there: never follow, never block
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            data = f.read(MAX_JUNIT + 1)
        if len(data) > MAX_JUNIT:
            return None
        root = ElementTree.fromstring(data)
    except (OSError, ElementTree.ParseError, ValueError):
        return None
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    cases = {}
    for case in root.iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            kind = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(child.tag)
            if kind and rank[kind] > rank[outcome]:
                outcome, message = kind, (child.get("message") or "")[:200]
        key = (case.get("classname") or "", case.get("name") or "")
        if key not in cases or rank[outcome] > rank[cases[key][0]]:
            cases[key] = (outcome, message)
    return cases


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


def run_tests(paths):
    """The visible tests: each `test_*` function of each file, with the repository on sys.path."""
    sys.path[:0] = h.env_paths() + [h.REPO]
    passed = failed = 0
    for rel in paths:
        try:
            spec = importlib.util.spec_from_file_location(rel[:-3].replace("/", "."), os.path.join(h.REPO, rel))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except BaseException as e:  # noqa: BLE001
            failed += 1
            print(f"ERROR {rel}: cannot import: {type(e).__name__}: {e}"[:400])
            continue
        for name in sorted(n for n in vars(module) if n.startswith("test") and callable(getattr(module, n))):
            try:
                getattr(module, name)()
                passed += 1
                print(f"PASS {rel}::{name}")
            except BaseException as e:  # noqa: BLE001
                failed += 1
                where = traceback.extract_tb(e.__traceback__)[-1]
                print(f"FAIL {rel}::{name}: {type(e).__name__}: {e}"[:300]
                      + f"\n    at {os.path.relpath(where.filename, h.REPO)}:{where.lineno}: {where.line}"[:300])
    print(f"== {passed} passed, {failed} failed")
