"""The visible tests' runner (`run_visible_tests`, and the visible pass rate the `score` mode
reports): pytest run for real, in a child started through child_channel.py's launcher, whose
counts come back signed, never parsed from what it printed.

- pytest, when the sandbox can import it (the task's environment, or the interpreter's own):
  test classes, parametrization, fixtures and conftest.py as pytest gives them, on the visible
  files or the node ids asked for. Configured as the trusted run is (pytest_run.py): `-c
  /dev/null`, `--rootdir`/`--confcutdir` the repository, `-o addopts=`, no plugin autoload, the
  environment's pytest11 plugins by name, and the options of the PRISTINE configuration (the
  snapshot's, read from its read-only base when the call has one; else from the tree as it is);
- else the plain runner: each `test_*` function of each file (the sandbox has no pytest).

What the counts mean: pytest's own reports of each test (a test is passed when its setup, call
and teardown all pass, failed when any fails, skipped otherwise), and a file that cannot be
collected is one failure. They are the model's own view: the tests and conftest.py it may have
edited run as they are (the trusted run restores them, this one does not), so they only feed
the observation and the per-turn credit, never the reward of the answer.

The observation is bounded: pytest's progress line, then the first failures (short
tracebacks, MAX_FAILURES of them, each cut at FAILURE_CHARS), then a summary line. Standard
library only, pytest where it runs.
"""

import importlib.util
import os
import sys
import time
import traceback

h = sys.modules["harness"]
PRISTINE_TREE = "/opt/flywheel-repo/tree"  # a stored snapshot's read-only base (repo_base.BASE_MOUNT)
MAX_FAILURES, FAILURE_CHARS = 5, 700


def serve(given, modules):
    """The launcher's entry: the writer first, then the tests, then the counts sent signed."""
    send = modules["child_channel"].Writer(given).send
    args = given["args"]
    sys.path[:0] = h.env_paths()
    try:
        import pytest  # noqa: F401  from the environment or the interpreter, before the repository
    except ImportError:
        passed, failed = run_plain(args["paths"])
    else:
        passed, failed = run_pytest(modules["pytest_run"], args["paths"])
    send({"kind": "counts", "passed": passed, "failed": failed})
    return 0


class Counter:
    """pytest hooks that keep each test's outcome and the first failures' text."""

    def __init__(self):
        self.outcome, self.failures = {}, []

    def keep(self, nodeid, text):
        if len(self.failures) < MAX_FAILURES:
            text = text.strip()
            cut = f"\n    [... {len(text) - FAILURE_CHARS} characters cut]" if len(text) > FAILURE_CHARS else ""
            self.failures.append(f"FAIL {nodeid}\n{text[-FAILURE_CHARS:]}{cut}")

    def pytest_collectreport(self, report):
        if report.failed:
            self.outcome[report.nodeid or "<collection>"] = "failed"
            self.keep(report.nodeid or "<collection>", f"cannot collect: {report.longreprtext}")

    def pytest_runtest_logreport(self, report):
        before = self.outcome.get(report.nodeid)
        if report.failed:
            if before != "failed":
                self.keep(report.nodeid, ("error in " + report.when + ": " if report.when != "call" else "")
                          + report.longreprtext)
            self.outcome[report.nodeid] = "failed"
        elif report.skipped and before != "failed":
            self.outcome[report.nodeid] = "skipped"
        elif report.when == "call" and before is None:
            self.outcome[report.nodeid] = "passed"

    def pytest_sessionfinish(self, session):
        session.config.option.tbstyle = "no"  # the failures are shown once, bounded, by run_pytest


def argv(pytest_run, targets):
    """pytest's command line: the trusted run's configuration (pytest_run.py), short tracebacks."""
    root = PRISTINE_TREE if os.path.isdir(PRISTINE_TREE) else h.REPO
    args = ["-c", os.devnull, "--rootdir", h.REPO, "--confcutdir", h.REPO, "-p", "no:cacheprovider",
            "-o", "addopts=", "-q", "-rN", "--tb=short", "-p", "no:pastebin"]
    for key, value in sorted(pytest_run.pristine_config(root).items()):
        if key in pytest_run.PATH_KEYS:  # the pristine tree's paths, as this tree's
            value = value.replace(root, h.REPO)
        args += ["-o", f"{key}={value}"]
    for name in pytest_run.env_plugins(h.env_paths()[:1]):
        args += ["-p", name]
    return [*args, "--", *targets]


def run_pytest(pytest_run, targets):
    """(passed, failed) of pytest on `targets`; its progress, the first failures and a summary
    line printed for the model."""
    import pytest
    for key in [k for k in os.environ if k.startswith(("PYTEST_", "PY_"))]:
        del os.environ[key]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sys.path.insert(len(h.env_paths()), h.REPO)
    counter, start = Counter(), time.monotonic()
    pytest.main(argv(pytest_run, targets), plugins=[counter])
    sys.stdout.flush()
    counts = {k: sum(v == k for v in counter.outcome.values()) for k in ("passed", "failed", "skipped")}
    print("\n" + "\n\n".join(counter.failures) if counter.failures else "")
    more = sum(v == "failed" for v in counter.outcome.values()) - len(counter.failures)
    if more > 0:
        print(f"[... {more} more failures]")
    print(f"== {counts['passed']} passed, {counts['failed']} failed"
          + (f", {counts['skipped']} skipped" if counts["skipped"] else "")
          + f" in {time.monotonic() - start:.2f}s")
    return counts["passed"], counts["failed"]


def run_plain(paths):
    """The visible tests without pytest: each `test_*` function of each file, with the
    repository on sys.path; (passed, failed). What it prints is for the model to read."""
    print("(pytest is not importable in this sandbox: each test_* function is called)")
    sys.path.insert(len(h.env_paths()), h.REPO)
    passed = failed = 0
    for rel in dict.fromkeys(p.split("::")[0] for p in paths):
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
    return passed, failed
