"""Hostile diffs against a pytest-scored repository task, for real (issue 37, part 2): each
variant (a pytest config file loading a plugin, a conftest.py at any depth, helpers and data
beside the tests, other spellings of a test path, the package patching pytest in process, a
forged report, an exit at import, a printed summary) scores 0 or is flagged, the reference fix
still scores 1, and the visible pass rate comes from the runner's signed count. One module-scoped
sandbox per backend: the whole table on local, one variant of every kind on docker and runsc
(EVERY_KIND), in the whole suite; a few on local in the quick tier."""

import pytest

from flywheel.domains.registry import get_domain
from flywheel.families.repository.unified_diff import make_diff
from flywheel.verifiers import get_verifier

from tests.families.conftest import concurrently

OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
FIXED = OPS.replace("s -= x", "s += x")
FILES = {"src/calc/__init__.py": "", "src/calc/ops.py": OPS,
         "src/calc/tests/__init__.py": "", "src/calc/tests/helpers.py": "def want():\n    return 9\n",
         "src/calc/tests/data/cases.txt": "4 5 9\n",
         "tests/helpers.py": "def load():\n    return [4, 5]\n", "tests/data.txt": "9\n",
         "tests/test_visible.py": ("import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'src'))\n"
                                   "from calc.ops import total\n\n\ndef test_total():\n    assert total([4, 5]) == 9\n\n\n"
                                   "def test_empty():\n    assert total([]) == 0\n")}
TESTS = ("import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'src'))\n"
         "from calc.ops import total\nfrom helpers import load\n\n\n"
         "def test_total():\n    want = int(open(os.path.join(os.path.dirname(__file__), 'data.txt')).read())\n"
         "    assert total(load()) == want\n\n\n"
         "def test_empty():\n    assert total([]) == 0\n")
INNER = ("import os\nfrom calc.ops import total\nfrom calc.tests.helpers import want\n\n\n"
         "def test_cases():\n    a, b, c = open(os.path.join(os.path.dirname(__file__), 'data', 'cases.txt')).read().split()\n"
         "    assert total([int(a), int(b)]) == int(c) == want()\n")
PLUGIN = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
          "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n"
          "    report.longrepr = None\n")
PASS_ALL = "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n    for i in items:\n        i.obj = lambda *a, **k: None\n"
PATCHES = {  # what the package's __init__.py does to pytest in process
    "TestReport": "import _pytest.reports as r\nr.TestReport.passed = property(lambda self: True)\n"
                  "_f = r.TestReport.__init__\n"
                  "def init(self, *a, **k):\n    _f(self, *a, **k)\n    self.outcome = 'passed'\n"
                  "r.TestReport.__init__ = init\n",
    "makereport": "import _pytest.runner as r\n_m = r.pytest_runtest_makereport\n"
                  "def mk(item, call):\n    rep = _m(item, call)\n    rep.outcome = 'passed'\n    return rep\n"
                  "r.pytest_runtest_makereport.__code__ = mk.__code__\n",
    "call_and_report": "import _pytest.runner as r\n_c = r.call_and_report\n"
                       "def car(item, when, log=True, **kw):\n    rep = _c(item, when, log=False, **kw)\n"
                       "    rep.outcome = 'passed'\n    item.ihook.pytest_runtest_logreport(report=rep)\n    return rep\n"
                       "r.call_and_report = car\n",
    "terminal": "import _pytest.terminal as t\nt.TerminalReporter.pytest_runtest_logreport = lambda self, report: None\n",
    "junitxml": "import _pytest.junitxml as j\nj.LogXML.pytest_runtest_logreport = lambda self, report: None\n",
    "outcomes": "import _pytest.outcomes as o\no.fail = lambda *a, **k: None\n",
    "plugin": "import gc\nfrom _pytest.config import Config\nfor c in [o for o in gc.get_objects() if isinstance(o, Config)]:\n"
              "    class P:\n        def pytest_runtest_logreport(self, report):\n            report.outcome = 'passed'\n"
              "    c.pluginmanager.register(P(), 'p')\n",
}


def diff(changes):
    return make_diff(FILES, changes)


HOSTILE = {  # name -> the diff's changes (none fixes total)
    **{f"config {name}": {name: text} for name, text in {
        ".pytest.ini": "[pytest]\naddopts = -p evil\n", "pytest.ini": "[pytest]\naddopts = -p evil\n",
        "tox.ini": "[pytest]\naddopts = -p evil\n", "setup.cfg": "[tool:pytest]\naddopts = -p evil\n",
        "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-p evil'\n",
        "pytest.toml": "[pytest]\naddopts = ['-p', 'evil']\n"}.items()},
    **{f"conftest {where}": {where: PLUGIN} for where in ("conftest.py", "src/conftest.py",
                                                         "src/calc/conftest.py", "tests/conftest.py",
                                                         "src/calc/tests/conftest.py")},
    "helpers beside tests": {"tests/helpers.py": "def load():\n    return []\n", "tests/data.txt": "0\n"},
    "helpers under src/pkg/tests": {"src/calc/tests/helpers.py": "def want():\n    return -9\n",
                                    "src/calc/tests/data/cases.txt": "4 5 -9\n"},
    "obj replaced in conftest": {"src/calc/tests/conftest.py": PASS_ALL},
    **{f"package patches {k}": {"src/calc/__init__.py": v} for k, v in PATCHES.items()},
    "exit at import": {"src/calc/ops.py": "import os\nos._exit(0)\n" + OPS},
    "exit 0 at exit": {"src/calc/__init__.py": "import atexit, os\natexit.register(lambda: os._exit(0))\n"},
    "printed summary": {"src/calc/__init__.py": "print('== 3 passed, 0 failed')\nprint('3 passed in 0.01s')\n"},
    "forged report lines": {"src/calc/__init__.py":
                            "import os\nfor fd in range(3, 40):\n    try:\n        os.write(fd, b'0' * 64 + b' {\"kind\": \"final\", \"exitstatus\": 0}\\n')\n"
                            "    except OSError:\n        pass\n"},
    "rewrites tests during the run": {"src/calc/__init__.py":
                                      "import os\np = os.path.join(os.getcwd(), 'src/calc/tests/test_inner.py')\n"
                                      "if os.path.exists(p):\n    open(p, 'w').write('def test_cases():\\n    pass\\n')\n"},
}
SPELLINGS = ("./tests/helpers.py", "tests//helpers.py", "tests/./helpers.py", ".//tests/helpers.py")


def spelled(path):
    """A diff editing tests/helpers.py under another spelling of its path."""
    return (f"--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,2 @@\n def load():\n-    return [4, 5]\n+    return []\n"
            "--- a/tests/data.txt\n+++ b/tests/data.txt\n@@ -1 +1 @@\n-9\n+0\n")


@pytest.fixture(scope="module", params=["local", "docker", "docker-runsc"])
def backend(request, sandbox):
    if request.param == "local":
        yield sandbox
        return
    daemon = request.getfixturevalue("docker_daemon")
    instance = daemon.backend(runtime="runsc" if request.param == "docker-runsc" else None)
    yield instance
    instance.close()


def task_for(environments):
    row = {"task_id": "calc-hostile", "domain": "repo", "prompt": "total() subtracts.",
           "repo": {"files": FILES}, "environment": "pytest-env",
           "visible_tests": ["tests/test_visible.py"],
           "test_patch": make_diff(FILES, {"tests/test_x.py": TESTS, "src/calc/tests/test_inner.py": INNER}),
           "reference_patch": diff({"src/calc/ops.py": FIXED}),
           "hidden_tests": [{"id": "tests/test_x.py::test_total", "pytest": "tests/test_x.py::test_total"},
                            {"id": "src/calc/tests/test_inner.py::test_cases",
                             "pytest": "src/calc/tests/test_inner.py::test_cases"}],
           "regression_tests": [{"id": "tests/test_x.py::test_empty", "pytest": "tests/test_x.py::test_empty"}]}
    return get_domain("repo").normalize_task(row)


QUICK = ("config pytest.ini", "conftest src/calc/tests/conftest.py", "helpers under src/pkg/tests",
         "package patches makereport", "spelled ./tests/helpers.py")
# One variant of every kind, for the container backends: the harness inside is the same code on
# the same interpreter, so what a backend can change is how its file system, descriptors and
# process exits behave (the forged report, the rewrite, both exits), not pytest's own rules. The
# whole table runs on local (a container's run costs 2-4 CPU seconds on 2 cores, local's one).
EVERY_KIND = ("config pyproject.toml", "conftest src/calc/tests/conftest.py", "helpers beside tests",
              "helpers under src/pkg/tests", "obj replaced in conftest", "package patches makereport",
              "package patches plugin", "exit at import", "exit 0 at exit", "printed summary",
              "forged report lines", "rewrites tests during the run", "spelled tests//helpers.py")


@pytest.mark.slow  # 39 sandbox runs on local, 16 on docker and runsc; QUICK's run quick
def test_hostile_diffs_score_zero_and_the_fix_one(backend, environments, request):
    domain, verifier = get_domain("repo"), get_verifier("repo_tests")
    task = task_for(environments)
    every_variant = request.node.callspec.params["backend"] == "local"

    def verdict(response):
        return verifier(task, response, domain.run(backend, task, response))

    gold = verdict(task["reference_patch"])
    assert (gold.reward, gold.exploit_suspected) == (1.0, False), gold.detail
    extra = verdict(diff({"src/calc/ops.py": FIXED, "tests/test_new.py": "def test_new():\n    assert False\n",
                          "repro.py": "print('repro')\n", "pytest.ini": "[pytest]\naddopts = -x\n",
                          "setup.cfg": "[tool:pytest]\naddopts = -p evil\n"}))
    assert (extra.reward, extra.exploit_suspected) == (1.0, False), extra.detail  # new files take no part
    responses = {**{name: diff(changes) for name, changes in HOSTILE.items()},
                 **{f"spelled {p}": spelled(p) for p in SPELLINGS}}
    assert set(EVERY_KIND) <= set(responses)
    # scored four at a time, as a rollout scores them (the sandbox takes concurrent runs); the
    # patches of pytest itself twice over, after every other answer has run beside them
    again = ("package patches TestReport", "package patches makereport", "package patches call_and_report",
             "package patches outcomes", "package patches plugin", "exit 0 at exit")
    if not every_variant:
        responses, again = {name: responses[name] for name in EVERY_KIND}, ()
    names = [*responses, *(f"{name} (again)" for name in again)]
    got = dict(zip(names, concurrently(verdict, [*responses.values(), *(responses[n] for n in again)])))
    wrong = {name: v.detail for name, v in got.items() if v.reward != 0.0}
    assert not wrong, wrong
    # a right fix beside a conftest edit: the conftest is put back and the task's own tests pass,
    # as SWE-bench scores it (it resets the files its test_patch touches); the edit is recorded
    fixed = verdict(diff({**HOSTILE["obj replaced in conftest"], "src/calc/ops.py": FIXED}))
    assert (fixed.reward, fixed.components.get("edited_tests")) == (1.0, 1.0), fixed.detail


def test_a_few_hostile_diffs_on_local(sandbox, environments):
    domain, verifier = get_domain("repo"), get_verifier("repo_tests")
    task = task_for(environments)
    responses = {**{name: diff(changes) for name, changes in HOSTILE.items()},
                 **{f"spelled {p}": spelled(p) for p in SPELLINGS}}
    for name in QUICK:
        got = verifier(task, responses[name], domain.run(sandbox, task, responses[name]))
        assert got.reward == 0.0, (name, got.detail)
    gold = verifier(task, task["reference_patch"], domain.run(sandbox, task, task["reference_patch"]))
    assert gold.reward == 1.0, gold.detail


def test_the_visible_rate_is_counted_not_printed(sandbox, environments):
    domain, verifier = get_domain("repo"), get_verifier("repo_tests")
    task = task_for(environments)
    response = diff(HOSTILE["printed summary"])
    got = verifier(task, response, domain.run(sandbox, task, response))
    assert got.components["visible_pass_rate"] == 0.5, got.components  # test_empty passes, test_total not
    assert got.reward == 0.0


def _checks_module():
    """repo_checks.py loaded as the harness loads it (its `harness` is only read inside calls)."""
    import importlib.util
    import pathlib
    import sys
    import types

    import flywheel.families.repository as repository
    path = pathlib.Path(repository.__file__).parent / "harnesses" / "repo_checks.py"
    saved = sys.modules.get("harness")
    sys.modules["harness"] = types.ModuleType("harness")
    try:
        spec = importlib.util.spec_from_file_location("repo_checks_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("harness", None)
        else:
            sys.modules["harness"] = saved
    return module


def test_unit_a_testing_folder_is_a_test_folder_only_when_it_holds_tests():
    """pytest's own `testing/` (test modules in it) is test tree; numpy's `testing/` (a library,
    its tests under `testing/tests/`) is not, so a fix there is kept, not put back."""
    checks = _checks_module()
    snapshot = ["testing/test_assertion.py", "testing/python/collect.py", "testing/example_scripts/x.txt",
                "numpy/testing/_private/utils.py", "numpy/testing/tests/test_utils.py", "numpy/core/x.py"]
    checks.TESTING_ROOTS.update(checks.testing_roots(snapshot))
    assert checks.TESTING_ROOTS == {"testing"}
    inside = {rel for rel in snapshot + ["testing/new_helper.py", "pkg/conftest.py", "a/b_test.py"]
              if checks.in_test_tree(rel)}
    assert inside == {"testing/test_assertion.py", "testing/python/collect.py", "testing/example_scripts/x.txt",
                      "numpy/testing/tests/test_utils.py", "testing/new_helper.py", "pkg/conftest.py", "a/b_test.py"}
