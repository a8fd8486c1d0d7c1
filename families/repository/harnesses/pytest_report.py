"""The trusted pytest run's child: pytest started with our recorder registered first, its
outcomes sent signed (child_channel.py), and tampering with pytest itself detected.

Runs inside the pytest process, beside the repository's code, so it trusts nothing that code can
reach by name: it is sent as text (never a file on disk), it reads the nonce and builds its
writer before pytest or any of the repository is imported, and it records:
- each test's reports (setup, call, teardown: outcome, xfail) as pytest's hooks deliver them, the
  node ids collected, the conftest and plugin modules registered, and pytest's exit status;
- tampering: pytest's and pluggy's classes and functions (TestReport, CallInfo, the runner's
  makereport and call_and_report, the terminal reporter, the hook callers, `_pytest.outcomes`,
  every other name of every `_pytest`/`pluggy` module loaded at the start) snapshotted by identity
  and code object, compared at every report and at the end; a report that is not pytest's own
  TestReport, a second report of one phase, a report outside its test's run; a test function
  whose code changed after collection; a plugin registered from anywhere but pytest, the task's
  environment, or a file the response did not change (as render_figure.py does for matplotlib).
The parent (pytest_run.py) checks the record against the process's exit status.

Standard library and pytest only.
"""

import os
import sys

WATCHED = ("_pytest.reports", "_pytest.runner", "_pytest.outcomes", "_pytest.skipping",
           "_pytest.python", "pluggy._callers", "pluggy._hooks")  # compared at every report


def identity(value):
    function = getattr(value, "__func__", value)
    code = getattr(function, "__code__", None)
    return [id(value), id(code)] if code is not None else [id(value)]


def code_like(value):
    """Whether `value` is behaviour (a function, class, method or descriptor), not data or a
    submodule: what a patch of pytest's machinery replaces."""
    return (not isinstance(value, type(sys))
            and (callable(value) or hasattr(type(value), "__get__")) and not isinstance(value, (str, bytes)))


def members(names):
    """{qualified name: identity} of every function and class of the modules `names` and of every
    method and descriptor of their classes: what a patch of pytest's machinery changes."""
    out = {}
    for name in names:
        module = sys.modules.get(name)
        out[name] = [id(module)]
        for key, value in list(vars(module).items()) if module is not None else ():
            if key.startswith("__") or not code_like(value):
                continue
            out[f"{name}.{key}"] = identity(value)
            if isinstance(value, type) and getattr(value, "__module__", "").startswith(("_pytest", "pluggy")):
                for attr, member in list(vars(value).items()):
                    if code_like(member) and (not attr.startswith("__") or attr in ("__init__", "__call__", "__new__")):
                        out[f"{name}.{key}.{attr}"] = identity(member)
    return out


def watched_objects(names):
    """The modules `names` and the pytest/pluggy classes they define: whose namespaces a patch of
    the reporting path changes (a replaced, added or removed function, method or class)."""
    out = []
    for name in names:
        module = sys.modules.get(name)
        if module is None:
            continue
        out.append(module)
        out += [v for v in vars(module).values() if isinstance(v, type)
                and getattr(v, "__module__", "").startswith(("_pytest", "pluggy"))]
    return out


def fingerprint(objects):
    """One cheap value that changes when any name of `objects` is rebound, added or removed, or a
    function's code is swapped: compared at every report; only a change pays for `members`."""
    out = []
    for o in objects:
        values = list(vars(o).values())
        out.append(tuple(map(id, values)))
        out.append(tuple(id(v.__code__) if type(v) is FUNCTION else id(v.__func__.__code__)
                         for v in values if type(v) is FUNCTION or type(v) in WRAPPERS))
    return out


FUNCTION, WRAPPERS = type(fingerprint), (staticmethod, classmethod)


def message(longrepr):
    """A report's reason in one line: a skip's reason, else the last line of the failure."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])[:200]
    lines = str(longrepr or "").strip().splitlines()
    return lines[-1][:200] if lines else ""


LEGACY = {"makedir", "fspath", "startdir", "invocation_dir", "rootdir", "inifile", "_getini_unknown_type"}


def legacy_patch(key):
    """Whether `key` (module.Class.attr) now holds what _pytest.legacypath itself sets there at
    startup (its own functions, by identity), the one patch of pytest's classes pytest makes."""
    parts = key.split(".")
    if parts[-1] not in LEGACY:
        return False
    legacy = sys.modules.get("_pytest.legacypath")
    for cut in range(len(parts) - 2, 0, -1):
        owner = sys.modules.get(".".join(parts[:cut]))
        if owner is None:
            continue
        value = owner
        for name in parts[cut:]:
            value = vars(value).get(name) if hasattr(value, "__dict__") else None
        function = getattr(value, "fget", value)
        return legacy is not None and getattr(legacy, getattr(function, "__name__", ""), None) is function
    return False


def changed(before, after):
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k) and not legacy_patch(k))


class Recorder:
    """pytest hooks that record outcomes and watch for tampering; `send` is the signed writer."""

    def __init__(self, send, pytest, allowed, env):
        self.send, self.pytest = send, pytest
        self.report_class = pytest.TestReport
        self.allowed, self.env = set(allowed), env
        self.all = sorted(n for n in sys.modules if n.startswith(("_pytest", "pluggy")) or n == "pytest")
        self.snapshot = members(self.all)
        self.watch()
        self.reports, self.collected, self.functions = {}, [], {}
        self.plugins, self.hooks, self.tampered = [], {}, []
        self.current = None
        self.wanted = None

    def watch(self):
        """What each report is compared with: the watched members, and their cheap fingerprint."""
        self.watched = members(WATCHED)
        self.watched_objects = watched_objects(WATCHED)
        self.watched_print = fingerprint(self.watched_objects)

    def flag(self, why):
        if len(self.tampered) < 20:
            self.tampered.append(why[:300])

    def trusted_plugin(self, plugin):
        """Whether a registered plugin comes from pytest/pluggy, the environment, this recorder
        or a repository file the response left as it was (a conftest.py, a plugin it names)."""
        if plugin is self:
            return True
        if isinstance(plugin, type(sys)):
            name, path = plugin.__name__, getattr(plugin, "__file__", None) or ""
        else:
            cls = plugin if isinstance(plugin, type) else type(plugin)
            name, path = cls.__module__, getattr(sys.modules.get(cls.__module__), "__file__", None) or ""
            if getattr(sys.modules.get(name), cls.__name__, None) is not cls:
                return False
        if name.startswith(("_pytest.", "pluggy")) or name in ("pytest", "_pytest"):
            return sys.modules.get(name) is not None and not path.startswith(self.allowed_root())
        real = os.path.realpath(path) if path else ""
        return bool(real) and (real in self.allowed or (self.env and real.startswith(self.env + os.sep)))

    def allowed_root(self):
        return os.getcwd() + os.sep  # pytest's own modules never live in the repository

    def pytest_plugin_registered(self, plugin, plugin_name, manager):
        if not self.trusted_plugin(plugin):
            self.flag(f"a plugin registered by the code under test: {plugin_name}")
        path = getattr(plugin, "__file__", None)
        if path:
            self.plugins.append(os.path.relpath(os.path.realpath(path)))

    def pytest_collection_modifyitems(self, session, config, items):
        """Only the tests the checks name run (their files were given whole)."""
        if self.wanted is None:
            return
        keep = [item for item in items if item.nodeid.split("[", 1)[0] in self.wanted]
        dropped = [item for item in items if item.nodeid.split("[", 1)[0] not in self.wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def pytest_collection_finish(self, session):
        self.collected = [item.nodeid for item in session.items]
        for item in session.items:
            self.functions[item.nodeid] = identity(getattr(item, "obj", None))
        self.hooks = self.hook_identities(session.config)

    @staticmethod
    def hook_identities(config):
        out = {}
        for name, caller in vars(config.pluginmanager.hook).items():
            if hasattr(caller, "get_hookimpls"):
                out[name] = sorted(identity(impl.function)[-1] for impl in caller.get_hookimpls())
        return out

    def pytest_runtest_protocol(self, item, nextitem):
        self.current = item.nodeid

    def pytest_runtest_logreport(self, report):
        if type(report) is not self.report_class:
            self.flag(f"a report of type {type(report).__name__} for {report.nodeid}")
        if report.nodeid != self.current:
            self.flag(f"a report for {report.nodeid} outside its test's run")
        phases = self.reports.setdefault(report.nodeid, {})
        if report.when in phases:
            self.flag(f"a second {report.when} report for {report.nodeid}")
        phases[report.when] = [report.outcome, getattr(report, "wasxfail", None) is not None,
                               message(report.longrepr) if report.outcome != "passed" else ""]
        if fingerprint(self.watched_objects) != self.watched_print:  # something was rebound: name what, by the full comparison
            moved = changed(self.watched, members(WATCHED))
            if moved:
                self.flag(f"pytest's machinery changed during {report.nodeid}: {', '.join(moved[:5])}")
            self.watch()

    def pytest_runtest_call(self, item):
        if identity(getattr(item, "obj", None)) != self.functions.get(item.nodeid, identity(getattr(item, "obj", None))):
            self.flag(f"the test function of {item.nodeid} was replaced after collection")

    def pytest_sessionfinish(self, session):
        moved = changed(self.snapshot, members(self.all))
        if moved:
            self.flag(f"pytest's machinery changed: {', '.join(moved[:8])}")
        hooks = self.hook_identities(session.config)
        if self.hooks and hooks != self.hooks:
            self.flag("pytest's hook implementations changed after collection: "
                      + ", ".join(sorted(k for k in hooks if hooks[k] != self.hooks.get(k)))[:200])
        self.send({"kind": "final", "exitstatus": int(session.exitstatus), "collected": self.collected,
                   "reports": self.reports, "tampered": self.tampered, "plugins": self.plugins[:200]})


def main(given, modules):
    """The launcher's entry: writer first, then pytest (from the environment, before the
    repository is on sys.path), then the run with the recorder registered ahead of every other
    plugin; pytest's exit status is the process's."""
    send = modules["child_channel"].Writer(given).send
    args = given["args"]
    env = [p for p in args["env"] if os.path.isdir(p)]
    sys.path[:0] = env
    import json, hashlib, hmac  # noqa: E401,F401  what the writer needs, loaded before the repository
    import importlib
    import pytest
    from _pytest.config import default_plugins, essential_plugins
    for name in (*essential_plugins, *default_plugins):  # all of pytest loaded, then snapshotted
        try:
            importlib.import_module("_pytest." + name)
        except ImportError:
            pass
    for name, options in (("pytest_runtest_protocol", {"tryfirst": True}),
                          ("pytest_runtest_logreport", {"tryfirst": True}),
                          ("pytest_sessionfinish", {"trylast": True}),
                          ("pytest_collection_modifyitems", {"trylast": True})):
        pytest.hookimpl(**options)(vars(Recorder)[name])
    sys.path.insert(len(env), os.getcwd())
    recorder = Recorder(send, pytest, args["allowed"], env[0] if env else "")
    recorder.wanted = set(args["wanted"]) if args.get("wanted") is not None else None
    send({"kind": "loaded"})
    code = pytest.main(args["argv"], plugins=[recorder])
    return int(code)
