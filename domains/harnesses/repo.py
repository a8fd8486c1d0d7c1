"""Sandbox side of repository episodes; runs as `python -I harness.py MODE` with the plan on stdin.

The tree is rebuilt in ./repo first: the plan's `tree` (an inline snapshot with the episode's
changes so far) written out, or a stored snapshot mounted read-only at the plan's `base` copied
in (the writable layer) with the plan's `changes` over it; the base's manifest (and the plan's
texts) give each file's digest, so a call's changes are found by hashing only the files whose
stat changed. unified_diff.py sits beside this file. Modes:

- `tool`: run one tool call (list, read, search, edit, patch, write, shell, tests) in ./repo, then
  report what it printed and how the tree changed (files changed or added, with their text, and
  files deleted), so the trusted side keeps the episode's state as changes from the snapshot;
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

A task's environment (packages, pytest among them) is mounted read-only at ENV, or built into the
task's docker image there; the children put it first on sys.path, shell commands get it on
PYTHONPATH. Packages in the interpreter's own site-packages (an image's) are found too: every
child runs with -I, which drops the work dir and the user's site, never the site-packages.

The parent makes itself non-dumpable before anything of the repository runs, reads its plan
(with the report marker's nonce) from stdin first, and prints one report line, the marker then
JSON. Standard library only.
"""

import ctypes
import fnmatch
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "repo")
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".git", ".mypy_cache"}
MAX_FILE, MAX_CHANGED = 262_144, 2_097_152       # a changed file's text; all changed files' text
MAX_LIST, MAX_MATCHES = 400, 100
ENV = "/opt/flywheel-env"                         # the task's environment, when it has one
JUNIT = os.path.join(HERE, ".flywheel", "junit.xml")
SCRATCH = os.path.join(HERE, ".flywheel", "scratch")  # the commands' HOME and TMPDIR
WATCHED = ("/dev/shm",)                           # writable places beside the work dir, if any
MAX_JUNIT = 1 << 23
# pytest is imported before the repository is on sys.path: a `pytest.py` of the model's never
# stands in for it. Node ids and the report's path come as arguments.
BOOTSTRAP = ("import os, sys\n"
             "env = [p for p in (%r,) if os.path.isdir(p)]\n"
             "sys.path[:0] = env\n"
             "import pytest\n"
             "sys.path.insert(len(env), os.getcwd())\n"
             "sys.exit(pytest.main(['-p', 'no:cacheprovider', '-q', '--junitxml=' + sys.argv[1], *sys.argv[2:]]))\n"
             % ENV)


def env_paths():
    """[ENV] when the task's environment is mounted, else []."""
    return [ENV] if os.path.isdir(ENV) else []


def load_unified_diff():
    spec = importlib.util.spec_from_file_location("unified_diff", os.path.join(HERE, "unified_diff.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- the tree and its changes
def stat_key(st):
    """What changes when a file's bytes do (ctime cannot be set back by the code)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def walk(root, known=None):
    """Relative path -> (kind, sha256 or link target) for everything under `root`, links not
    followed. `known` ({path: (stat key, entry)}, from `rebuild`) spares hashing the files whose
    stat key is unchanged."""
    known, entries = known or {}, {}
    for here, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(here, name)
            rel = os.path.relpath(path, root)
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    entries[rel] = ("link", os.readlink(path))
                elif stat.S_ISREG(st.st_mode):
                    seen = known.get(rel)
                    entries[rel] = seen[1] if seen and seen[0] == stat_key(st) else ("file", file_digest(path))
                else:
                    entries[rel] = ("other", "")
            except OSError as e:
                entries[rel] = ("error", str(e))
    return entries


def file_digest(path):
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def read_text(path, limit):
    """(text, problem): a regular file's UTF-8 text up to `limit` bytes, or None and why not."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None, "not a regular file"
        data = f.read(limit + 1)
    if len(data) > limit:
        return None, f"over {limit} bytes"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return None, "not UTF-8 text"


def tree_delta(before, after):
    """How the tree changed between two walks: {"changed": {path: text}, "deleted": [path],
    "skipped": {path: why}} (links, binary or oversized files are not kept)."""
    changed, skipped, total = {}, {}, 0
    for rel, entry in after.items():
        if before.get(rel) == entry:
            continue
        if entry[0] != "file":
            skipped[rel] = "a symbolic link" if entry[0] == "link" else "not a regular file"
            continue
        text, problem = read_text(os.path.join(REPO, rel), MAX_FILE)
        if text is not None and total + len(text) > MAX_CHANGED:
            text, problem = None, "over the changes' size limit"
        if text is None:
            skipped[rel] = problem
            continue
        changed[rel], total = text, total + len(text)
    deleted = sorted(rel for rel, entry in before.items() if rel not in after and entry[0] == "file")
    return {"changed": changed, "deleted": deleted, "skipped": skipped}


def outside_entries():
    """What a command could write outside the repository, path -> stat: each entry of the work dir
    beside the repository and the harness's own folder (the harness's files included), and of
    WATCHED. Not the scratch HOME and TMPDIR (under .flywheel): caches and temporary files."""
    seen = {}
    for top, own in ((HERE, {"repo", ".flywheel"}), *((w, set()) for w in WATCHED)):
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for name in names:
            if name in own:
                continue
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            shown = name if top == HERE else os.path.join(top, name)
            seen[shown] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    return seen


def touched(before, after):
    """The entries outside the repository written, made or removed between two outside_entries."""
    return sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))


def inside(path):
    """The absolute path of repository-relative `path`, or ValueError when it leaves the tree."""
    if not isinstance(path, str) or not path or "\0" in path or os.path.isabs(path):
        raise ValueError(f"{path!r} is not a path inside the repository")
    full = os.path.normpath(os.path.join(REPO, path))
    if full != REPO and not full.startswith(REPO + os.sep):
        raise ValueError(f"{path!r} is outside the repository")
    real = os.path.realpath(full)
    if real != REPO and not real.startswith(REPO + os.sep):
        raise ValueError(f"{path!r} leads outside the repository through a link")
    return full


# ---------------------------------------------------------------- the tools
def tool_list(args, plan):
    pattern = args.get("pattern") or "*"
    names = [rel for rel in walk(REPO)
             if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(os.path.basename(rel), pattern)]
    shown = names[:MAX_LIST]
    more = f"\n[... {len(names) - len(shown)} more]" if len(names) > len(shown) else ""
    return ("\n".join(shown) + more) if names else f"no files match {pattern!r}"


def tool_read(args, plan):
    path = inside(args["path"])
    if os.path.isdir(path):
        return tool_list({"pattern": os.path.relpath(path, REPO) + "/*"}, plan)
    text, problem = read_text(path, MAX_FILE) if os.path.lexists(path) else (None, "no such file")
    if text is None:
        raise ValueError(f"{args['path']} cannot be read: {problem}")
    lines = text.splitlines()
    start = max(1, int(args.get("start") or 1))
    end = min(len(lines), int(args.get("end") or len(lines)))
    if not lines:
        return f"{args['path']} is empty"
    width = len(str(end))
    body = "\n".join(f"{n:>{width}}| {lines[n - 1]}" for n in range(start, end + 1))
    return f"{args['path']} (lines {start}-{end} of {len(lines)})\n{body}"


def tool_search(args, plan):
    try:
        pattern = re.compile(args["pattern"])
    except re.error as e:
        raise ValueError(f"the pattern is not a regular expression: {e}") from None
    where = args.get("path") or "*"
    hits, files = [], 0
    for rel, entry in walk(REPO).items():
        if entry[0] != "file" or not (fnmatch.fnmatch(rel, where) or rel.startswith(where.rstrip("/") + "/")):
            continue
        text, _ = read_text(os.path.join(REPO, rel), MAX_FILE)
        if text is None:
            continue
        files += 1
        for n, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{rel}:{n}: {line.strip()[:200]}")
                if len(hits) > MAX_MATCHES:
                    return "\n".join(hits[:MAX_MATCHES]) + f"\n[... more matches; narrow the search]"
    return "\n".join(hits) if hits else f"no match for {args['pattern']!r} in {files} files"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.islink(path):
        os.unlink(path)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def tool_edit(args, plan):
    path = inside(args["path"])
    text, problem = read_text(path, MAX_FILE) if os.path.exists(path) else (None, "no such file")
    if text is None:
        raise ValueError(f"{args['path']}: {problem}")
    count = text.count(args["old"]) if args["old"] else 0
    if count != 1:
        raise ValueError(f"{args['path']}: `old` occurs {count} times; it must occur exactly once "
                         "(copy it exactly, with more lines around it to make it unique)")
    write(path, text.replace(args["old"], args["new"], 1))
    return f"edited {args['path']}"


def tool_write(args, plan):
    write(inside(args["path"]), args["content"])
    return f"wrote {args['path']} ({len(args['content'])} characters)"


def tool_patch(args, plan):
    ud = load_unified_diff()
    files = {}
    for rel in ud.changed_paths(args["patch"]):
        full = inside(rel)
        if os.path.isfile(full) and not os.path.islink(full):
            text, problem = read_text(full, MAX_FILE)
            if text is None:
                raise ValueError(f"{rel}: {problem}")
            files[rel] = text
    changes = ud.apply_diff(files, args["patch"])
    for rel, text in changes.items():
        if text is None:
            os.unlink(inside(rel))
        else:
            write(inside(rel), text)
    return "applied the patch: " + ", ".join(sorted(changes)) if changes else "the patch changes nothing"


def shell_env():
    """The commands' environment: the sandbox's, with its Python first on PATH as `python`, and
    HOME and TMPDIR a scratch folder that writes outside the repository may go to."""
    bin_dir = os.path.join(HERE, ".flywheel", "bin")
    if not os.path.isdir(bin_dir):
        os.makedirs(bin_dir)
        for name in ("python", "python3"):
            os.symlink(sys.executable, os.path.join(bin_dir, name))
    os.makedirs(SCRATCH, exist_ok=True)
    env = dict(os.environ)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["HOME"] = env["TMPDIR"] = SCRATCH  # a command's caches and temporary files: not "outside"
    if env_paths():
        env["PYTHONPATH"] = os.pathsep.join(env_paths() + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def run_logged(argv, budget_s, log_bytes, cwd=REPO, stdin=None):
    """(exit code or None on timeout, the output's tail): `argv` in its own session, killed with
    whatever it started when it ends or runs out of time."""
    log_path = os.path.join(os.path.dirname(REPO), ".flywheel", "log.txt")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL if stdin is None else stdin,
                                stdout=log, stderr=log, close_fds=True, start_new_session=True,
                                env=shell_env())
        try:
            code = proc.wait(timeout=max(0.1, budget_s))
        except subprocess.TimeoutExpired:
            code = None
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
    with open(log_path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - log_bytes))
        tail = f.read().decode("utf-8", "replace")
    return code, (f"[... {size - log_bytes} bytes cut ...]\n" if size > log_bytes else "") + tail


def tool_shell(args, plan):
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"  # a minimal image: sh
    code, out = run_logged([shell, "-c", args["command"]], plan["budget_s"], plan["log_bytes"])
    status = "timed out" if code is None else f"exit {code}"
    return f"$ {args['command'][:200]}\n{out}\n[{status}]"


def tool_tests(args, plan):
    wanted = args.get("paths") or plan["visible_tests"]
    unknown = [p for p in wanted if p not in plan["visible_tests"]]
    if unknown:
        raise ValueError(f"not a visible test file: {', '.join(unknown)[:200]}; "
                         f"they are {', '.join(plan['visible_tests'])[:300]}")
    code, out = run_logged([sys.executable, "-I", "-B", os.path.join(HERE, "harness.py"), "runtests",
                            *wanted], plan["budget_s"], plan["log_bytes"])
    counts = re.findall(r"^== (\d+) passed, (\d+) failed", out, re.M)
    passed, failed = map(int, counts[-1]) if counts else (0, 0)
    status = "timed out" if code is None else ""
    PLAN_TESTS.update(passed=passed, failed=failed)
    return out + (f"\n[{status}]" if status else "")


PLAN_TESTS = {}
TOOLS = {"list_files": tool_list, "read_file": tool_read, "search": tool_search,
         "edit_file": tool_edit, "write_file": tool_write, "apply_patch": tool_patch,
         "run_shell": tool_shell, "run_tests": tool_tests}


def rebuild(plan):
    """Write the tree: the plan's whole `tree`, or the mounted `base` copied (the writable layer)
    with the plan's `changes` laid over it. Returns {path: (stat key, entry)} of every file
    written, so that a later walk hashes only what a call touched."""
    digests = {}
    if "base" in plan:
        source = os.path.join(plan["base"], "tree")
        if os.path.exists("/bin/cp"):
            subprocess.run(["/bin/cp", "-a", source + "/.", REPO], check=True)
        else:
            shutil.copytree(source, REPO, symlinks=True, dirs_exist_ok=True)
        with open(os.path.join(plan["base"], "manifest.json"), encoding="utf-8") as f:
            digests = json.load(f)
        texts = plan["changes"]
    else:
        texts = plan["tree"]
    for rel, text in texts.items():
        path = inside(rel)
        if text is None:
            if os.path.lexists(path):
                os.unlink(path)
            digests.pop(rel, None)
            continue
        write(path, text)
        digests[rel] = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    known = {}
    for rel, digest in digests.items():
        try:
            st = os.lstat(os.path.join(REPO, rel))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            known[rel] = (stat_key(st), ("file", digest))
    return known


def run_tool(plan, known):
    call = plan["call"]
    before = {rel: entry for rel, (_, entry) in known.items()}
    outside = outside_entries()
    error = None
    try:
        observation = TOOLS[call["name"]](call["arguments"], plan)
    except Exception as e:  # noqa: BLE001  a bad call is the model's: an error observation
        observation, error = f"error: {e}", str(e)[:500]
    report = {"observation": observation, "error": error, "delta": tree_delta(before, walk(REPO, known)),
              "outside": touched(outside, outside_entries())}
    if PLAN_TESTS:
        report["tests"] = dict(PLAN_TESTS)
    return report


# ---------------------------------------------------------------- scoring
def protected(rel, patterns):
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p) for p in patterns)


def score(plan, known=None):
    ud = load_unified_diff()
    try:
        test_paths = set(ud.changed_paths(plan.get("test_patch") or ""))
    except (ValueError, TypeError) as e:
        return {"applied": False, "test_patch_error": f"the task's test_patch: {e}"[:600]}
    guarded = lambda rel: protected(rel, plan["protected"]) or rel in test_paths  # noqa: E731
    pristine = {}
    for rel, entry in walk(REPO, known).items():
        if entry[0] == "file" and guarded(rel):
            pristine[rel] = read_text(os.path.join(REPO, rel), 1 << 24)[0]
    files = {}
    try:
        paths = ud.changed_paths(plan["patch"])
        for rel in paths:
            full = inside(rel)
            if os.path.isfile(full):
                files[rel] = read_text(full, 1 << 24)[0]
        changes = ud.apply_diff(files, plan["patch"])
    except (ValueError, TypeError) as e:
        return {"applied": False, "error": str(e)[:600]}
    for rel, text in changes.items():
        if text is None:
            os.unlink(inside(rel))
        else:
            write(inside(rel), text)
    tampered = sorted(rel for rel in changes if guarded(rel))
    for rel in tampered:  # the checks run on the pristine tests, never the model's
        if rel in pristine and pristine[rel] is not None:
            write(inside(rel), pristine[rel])
        elif os.path.lexists(inside(rel)):
            os.unlink(inside(rel))
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
        _, out = run_logged([sys.executable, "-I", "-B", os.path.join(HERE, "harness.py"), "runtests",
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
            full = inside(rel)
            if os.path.isfile(full):
                files[rel] = read_text(full, 1 << 24)[0]
        for rel, text in ud.apply_diff(files, patch).items():
            if text is None:
                os.unlink(inside(rel))
            else:
                write(inside(rel), text)
    except (ValueError, TypeError, OSError) as e:
        return f"the task's test_patch does not apply: {e}"[:600]
    return None


def pytest_found():
    """Whether the children can import pytest (the environment, then the sandbox's own Python),
    decided here, by path alone: nothing of the repository runs and no file of it counts."""
    return importlib.machinery.PathFinder.find_spec("pytest", env_paths() + sys.path[1:]) is not None


def run_pytest(checks, budget_s):
    """({check id: {"ok", "why"}}, facts for the report) for checks {"id", "pytest": NODEID}: one
    pytest child in the repository, its outcomes read from the JUnit XML it writes."""
    if not pytest_found():
        why = "pytest is not importable in the sandbox: the task's environment has no pytest"
        return {c["id"]: {"ok": False, "why": why} for c in checks}, {"pytest_missing": True}
    if os.path.lexists(JUNIT):
        os.unlink(JUNIT)
    nodes = list(dict.fromkeys(c["pytest"] for c in checks))
    code, out = run_logged([sys.executable, "-I", "-B", "-c", BOOTSTRAP, JUNIT, "--", *nodes],
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
    child = subprocess.Popen([sys.executable, "-I", "-B", os.path.join(HERE, "harness.py"), "checks"],
                             cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
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
    sys.path[:0] = env_paths() + [REPO]
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
    sys.path[:0] = env_paths() + [REPO]
    passed = failed = 0
    for rel in paths:
        try:
            spec = importlib.util.spec_from_file_location(rel[:-3].replace("/", "."), os.path.join(REPO, rel))
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
                      + f"\n    at {os.path.relpath(where.filename, REPO)}:{where.lineno}: {where.line}"[:300])
    print(f"== {passed} passed, {failed} failed")


def main():
    mode = sys.argv[1]
    if mode == "checks":
        return serve_checks()
    if mode == "runtests":
        return run_tests(sys.argv[2:])
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, before any of the repository runs
    plan = json.loads(sys.stdin.read())
    os.makedirs(os.path.join(os.path.dirname(REPO), ".flywheel"), exist_ok=True)
    os.makedirs(REPO, exist_ok=True)
    start = time.monotonic()
    known = rebuild(plan)
    plan.pop("tree", None)
    rebuilt = time.monotonic() - start
    report = run_tool(plan, known) if mode == "tool" else score(plan, known)
    report["rebuild_ms"] = round(rebuilt * 1000, 3)  # the tree from snapshot + changes
    sys.stdout.write("\n" + plan["marker"] + json.dumps(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
