"""The trusted pytest run of the `score` mode (repo_checks.py): its command line, its child, and
the grading of what the child's signed record says.

- Configuration: pytest is started with `-c /dev/null` (no configuration file of the tree is
  read: a `pytest.ini`, `.pytest.ini`, `pytest.toml`, `tox.ini`, `setup.cfg` or
  `pyproject.toml` the response wrote never counts), `--rootdir` and `--confcutdir` pinned to the
  repository, `-p no:cacheprovider`, `-o addopts=`, PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 and every
  PYTEST_*/PY_* variable cleared. The settings a real repository's tests need (python_files,
  markers, filterwarnings, xfail_strict, pythonpath, ...) are taken from the PRISTINE
  configuration (`pristine_config`, read before the response's diff is applied) and given as
  `-o` options; `addopts`, `required_plugins` and other plugin-loading keys are never taken. The
  environment's own pytest plugins (its `pytest11` entry points) are loaded by name with `-p`.
- Outcomes: the child (pytest_report.py) sends one signed final record; `outcomes` checks it
  against the exit status and turns each node's phase reports into SWE-bench's statuses.
- Grading (SWE-bench 5.x, swebench/harness/grading.py): a hidden (FAIL_TO_PASS) check passes only
  as PASSED or XFAIL (skipped, missing, XPASS fail: SWE-bench's log parser has no XPASS status);
  a regression (PASS_TO_PASS) check holds as PASSED, XFAIL or SKIPPED. A check id that is not a
  collected node id is matched as SWE-bench's log parser cuts ids (at the first blank), or as a
  prefix when it ends inside an unclosed `[...]` (a truncated parametrized id); pytest is given
  the ids' files and runs each id's test function (every parametrization).

Standard library only.
"""

import configparser
import os
import re
import sys

h = sys.modules["harness"]
CONFIG_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
NEVER_TAKEN = {"addopts", "required_plugins", "minversion", "cache_dir", "testpaths", "confcutdir",
               "rootdir", "plugins", "python_path"}
PATH_KEYS = {"pythonpath"}
PASSED, FAILED, ERROR, SKIPPED, XFAIL, XPASS, MISSING = ("PASSED", "FAILED", "ERROR", "SKIPPED",
                                                       "XFAIL", "XPASS", "missing")
EXIT_WITHOUT_TESTS = {2, 3, 4, 5}  # interrupted, internal error, usage error, no tests collected


def read_config(root, name):
    """{key: text} of the pytest section of `root/name`, or None when it has none."""
    path = os.path.join(root, name)
    text, _ = h.read_text(path, 1 << 20) if os.path.isfile(path) and not os.path.islink(path) else (None, "")
    if text is None:
        return None
    if name.endswith(".toml"):
        try:
            import tomllib
        except ImportError:  # Python 3.10: the toml forms are not read
            return None
        try:
            data = tomllib.loads(text)
        except ValueError:
            return None
        tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
        table = (data.get("pytest") if name != "pyproject.toml" else
                 (tool.get("pytest") or {}).get("ini_options") or tool.get("pytest"))
        if not isinstance(table, dict):
            return None
        return {k: ("\n".join(map(str, v)) if isinstance(v, list) else str(v).lower() if isinstance(v, bool)
                    else str(v)) for k, v in table.items() if not isinstance(v, dict)}
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    section = "tool:pytest" if name == "setup.cfg" else "pytest"
    if not parser.has_section(section):
        return {} if name in ("pytest.ini", ".pytest.ini") else None
    return dict(parser.items(section))


def pristine_config(root):
    """The options to pass as `-o`: the first pytest configuration in `root` in pytest's own
    order, less the keys that load code or options (NEVER_TAKEN)."""
    for name in CONFIG_FILES:
        found = read_config(root, name)
        if found is not None:
            options = {}
            for key, value in found.items():
                if key in NEVER_TAKEN or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                    continue
                if key in PATH_KEYS:
                    parts = [os.path.normpath(os.path.join(root, p)) for p in value.split()]
                    value = " ".join(p for p in parts if p == root or p.startswith(root + os.sep))
                options[key] = value
            return options
    return {}


def env_plugins(paths):
    """The `pytest11` entry point names of the environment's distributions (their plugins load
    by name, as autoload would have loaded them)."""
    names = []
    for root in paths:
        for entry in sorted(os.listdir(root)) if os.path.isdir(root) else ():
            if not entry.endswith(".dist-info"):
                continue
            parser = configparser.RawConfigParser(strict=False, interpolation=None)
            try:
                parser.read(os.path.join(root, entry, "entry_points.txt"), encoding="utf-8")
            except (configparser.Error, UnicodeDecodeError):
                continue
            if parser.has_section("pytest11"):
                names += [n for n in parser.options("pytest11") if re.fullmatch(r"[\w.-]+", n)]
    return list(dict.fromkeys(names))


def selection(node_ids):
    """The tests the ids name: each id's test function (its parametrizations all), no repeats."""
    return list(dict.fromkeys(i.split("[", 1)[0] for i in node_ids))


def files_of(node_ids):
    """What pytest is given: the files of the ids that exist in the tree, as SWE-bench runs the
    test files (an id naming no test is then missing, never an error that stops the run);
    the recorder deselects every test `selection` does not name."""
    files = dict.fromkeys(i.split("::", 1)[0] for i in node_ids)
    return [f for f in files if os.path.isfile(os.path.join(h.REPO, f))]


def child_env():
    env = {k: v for k, v in h.shell_env().items() if not k.startswith(("PYTEST_", "PY_", "PYTHON"))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def run(node_ids, budget_s, config, allowed):
    """(final record or None, facts): pytest on `node_ids` in its trusted child."""
    argv = ["-c", os.devnull, "--rootdir", h.REPO, "--confcutdir", h.REPO, "-p", "no:cacheprovider",
            "-o", "addopts=", "-q", "-rN", "--tb=short", "-p", "no:pastebin"]
    for key, value in sorted(config.items()):
        argv += ["-o", f"{key}={value}"]
    for name in env_plugins(h.env_paths()):
        argv += ["-p", name]
    channel = h.load_sibling("child_channel")
    code, out, records, forged = channel.run_child(
        h, h.child_modules("child_channel", "pytest_report"), ("pytest_report", "main"),
        {"argv": [*argv, "--", *files_of(node_ids)], "wanted": selection(node_ids), "env": h.env_paths(),
         "allowed": sorted(allowed)},
        budget_s, 1500, env=child_env())
    facts = {"pytest_exit": code, "pytest_output": out[-1500:]}
    finals = [r for r in records if r.get("kind") == "final"]
    tampered = list(finals[0].get("tampered") or []) if finals else []
    if forged or len(finals) > 1:
        tampered.append("the report channel carried lines the run's key did not sign")
    final = finals[-1] if finals else None
    if final is not None and code is not None and final.get("exitstatus") != code:
        tampered.append(f"pytest's session ended with status {final.get('exitstatus')}, "
                        f"the process with {code}")
    if final is not None and not tampered:
        statuses = outcomes(final)
        bad = any(s in (FAILED, ERROR) for s in statuses.values())
        if (code == 0 and bad) or (code == 1 and not bad):
            tampered.append(f"pytest exited {code} but its reports say {'failures' if bad else 'none failed'}")
    if tampered:
        facts["tampered_pytest"] = tampered[:10]
    if final is None:
        loaded = any(r.get("kind") == "loaded" for r in records)
        facts["exited_early"] = code is not None and loaded
        facts["why"] = ("pytest ran out of time" if code is None else
                        f"pytest ended (exit {code}) without its session's record: the process exited early"
                        if loaded else f"pytest did not start (exit {code})")
    return final, facts


def outcomes(final):
    """{node id: SWE-bench status} from the record's per-phase reports ([outcome, xfail])."""
    out = {}
    for node in final.get("collected") or []:
        phases = (final.get("reports") or {}).get(node) or {}
        setup, call, teardown = (phases.get(w) for w in ("setup", "call", "teardown"))
        status = MISSING
        if setup and setup[0] == "failed":
            status = ERROR
        elif setup and setup[0] == "skipped":
            status = XFAIL if setup[1] else SKIPPED
        elif call:
            status = {("passed", False): PASSED, ("passed", True): XPASS, ("failed", False): FAILED,
                      ("failed", True): FAILED, ("skipped", True): XFAIL,
                      ("skipped", False): SKIPPED}.get(tuple(call[:2]), MISSING)
        if teardown and teardown[0] == "failed":
            status = ERROR
        out[node] = status
    return out


def reason(final, node):
    """The message of `node`'s worst phase report, for the verdict's detail."""
    phases = (final.get("reports") or {}).get(node) or {}
    return next((p[2] for p in phases.values() if len(p) > 2 and p[2]), "")


# The log SWE-bench grades: `pytest -rA --no-fold-skipped`'s short summary (one line per report
# category, in pytest's "PpsxXEf" order), between the eval script's markers, with the exit code.
START, END, EXIT_LINE = ">>>>> Start Test Output", ">>>>> End Test Output", ">>>>> Test Exit Code"
SUMMARY = (("passed", PASSED), ("skipped", SKIPPED), ("xfailed", XFAIL), ("xpassed", XPASS),
           ("error", ERROR), ("failed", FAILED))
LOG_STATUSES = (FAILED, PASSED, SKIPPED, ERROR, XFAIL)  # swebench's TestStatus: no XPASS
PASSING = (PASSED, XFAIL)


def category(when, outcome, xfail):
    """pytest's report category (pytest_report_teststatus) of one phase report, or None."""
    if outcome == "skipped":
        return "xfailed" if xfail else "skipped"
    if when == "call":
        return ("xpassed" if xfail else "passed") if outcome == "passed" else "failed"
    return "error" if outcome == "failed" else None


def test_log(final, code):
    """The run as SWE-bench's eval log would hold it: each report as `pytest -rA
    --no-fold-skipped` summarizes it (node ids on one line: a newline in an id is escaped, never
    a line of its own), between the markers, then the test command's exit status."""
    groups = {name: [] for name, _ in SUMMARY}
    for node, phases in (final.get("reports") or {}).items():
        shown = node.replace("\r", "\\r").replace("\n", "\\n")
        for when in ("setup", "call", "teardown"):
            report = phases.get(when)
            kind = category(when, report[0], report[1]) if report else None
            if kind:
                groups[kind].append(shown)
    lines = [f"{word} {node}" for name, word in SUMMARY for node in groups[name]]
    return "\n".join([START, *lines, END, f"{EXIT_LINE}: {code}"]) + "\n"


def parse_log(log):
    """{test: status} as swebench.harness.log_parsers.python.parse_log_pytest reads `log` (5.0.2)."""
    found = {}
    for line in log.split("\n"):
        if line.startswith(LOG_STATUSES):
            if line.startswith(FAILED):
                line = line.replace(" - ", " ")
            case = line.split()
            if len(case) <= 1 or (case[0] == SKIPPED and re.match(r"^\[\d+\]$", case[1])):
                continue
            found[case[1]] = case[0]
    return found


def resolve(case, statuses):
    """The key of `case` in `statuses` as swebench's grading finds it (_resolve_case): itself, or
    for a truncated parametrized id (more `[` than `]`) the first key it prefixes when all such
    keys agree on passing; else None (missing)."""
    if case in statuses:
        return case
    if case.count("[") > case.count("]"):
        matches = [k for k in statuses if k.startswith(case)]
        if matches and len({statuses[k] in PASSING for k in matches}) == 1:
            return matches[0]
    return None


def grade(checks, final, facts):
    """{check id: {"ok", "why", "status"}}: SWE-bench 5.x's grading of the log our signed record
    makes (test_log, parse_log): a hidden (FAIL_TO_PASS) check passes as PASSED or XFAIL only; a
    regression (PASS_TO_PASS) check holds as PASSED, XFAIL or SKIPPED; missing fails both. A run
    that exited non-zero with no failure in its log is not trusted (every check fails), as
    swebench's get_logs_eval rules."""
    if final is None or facts.get("tampered_pytest"):
        why = facts.get("why") or "pytest's record was tampered with: " + "; ".join(facts.get("tampered_pytest", []))
        return {c["id"]: {"ok": False, "why": why[:300]} for c in checks}
    code = facts.get("pytest_exit")
    log = test_log(final, code)
    facts["test_log"] = log
    statuses = parse_log(log.split(START, 1)[1].split(END, 1)[0])
    ours = outcomes(final)
    if code not in (None, 0) and statuses and not any(s in (FAILED, ERROR) for s in statuses.values()):
        why = f"pytest exited {code} with no failure in its log: the run is not graded (SWE-bench's rule)"
        return {c["id"]: {"ok": False, "why": why, "status": "invalid"} for c in checks}
    results = {}
    for check in checks:
        key = resolve(check["pytest"], statuses)
        status = statuses[key] if key is not None else MISSING
        ok = status in (PASSING + (SKIPPED,) if check.get("group") == "regression" else PASSING)
        why = "" if ok else (
            f"{status.lower()}: {reason(final, key)}" if key is not None else
            "an unexpected pass (XPASS): not a pass in SWE-bench's log" if ours.get(check["pytest"]) == XPASS else
            "not in pytest's report (not collected, not run, or a truncated id matching outcomes that disagree)")
        results[check["id"]] = {"ok": ok, "why": why, "status": status}
    return results
