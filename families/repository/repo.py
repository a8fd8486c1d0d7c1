"""Repository episodes: a codebase, a problem statement, tools, and tests that run for real.

Task fields (the native form; families/repository/repo_suite.py generates them, users write them as JSONL):
- `prompt`: the problem statement; `repo`: the snapshot, inline {"files": {path: text}}, or
  stored {"snapshot": DIGEST, "file_count": N} (repo_snapshot.py), read from the user's store
  (default_store(): $FLYWHEEL_SNAPSHOT_STORE), never from one a row names: a row whose
  `repo.store` names another store is refused (normalize_task writes the user's own there); a
  row may instead name a folder, an archive or `REPO@COMMIT` ({"path": P} or just P, relative
  to the task file's folder by task_paths.py's rules), which normalize_task reads into the
  user's store;
- `visible_tests`: test files in the snapshot the model may run (`run_visible_tests`);
- `hidden_tests` (fail on the snapshot, must pass after: SWE-bench's FAIL_TO_PASS) and
  `regression_tests` (pass before, must still pass: PASS_TO_PASS), each a list of checks
  {"id", "module", "call", "expect"}: `call` is an expression evaluated in `module` with the
  repository on sys.path, whose value must equal `expect` (JSON); or {"id", "pytest"}: a pytest
  node id (SWE-bench's tests; `test_patch` adds their files at scoring time);
- optional `environment` (a name: packages prepared with `flywheel env build`, mounted read-only
  in every call's sandbox; repo_environments.py; pytest checks need one holding pytest),
  `test_patch` (a unified diff adding the pytest checks' files, applied after the answer; its
  files are protected too), `protected` (globs of further files the change may not touch, beyond
  the test tree the harness always restores; default PROTECTED),
  `reference_patch` (a unified diff that solves it; the `answer`), `golden` (tool calls that solve it),
  `image` (on the docker backend, the image every call runs in: `flywheel-env/NAME` from `flywheel
  env build NAME ... --image`, or one the user pulled or `docker load`ed, e.g. a SWE-bench image;
  the local backend ignores it and needs the environment folder), `limits` (the sandbox limits
  of every call, over the domain's: {"timeout_s", "memory_mb", "disk_mb", "processes"}; a real
  repository's test suite needs more than the built-in suite's 10 s).

The episode's state is the change from the snapshot ({"changes": {path: text or None}, "log": [...]},
and "outside": the paths a shell command wrote outside the repository, which flag the episode),
never the tree: each call rebuilds the tree in a fresh sandbox from the snapshot and the changes,
and the harness (families/repository/harnesses/repo.py) reports how the call changed it. The answer is the
unified diff of the changes; scoring applies it to the snapshot, puts the whole test tree back,
and evaluates the checks in children: module checks never see an expected value, pytest checks
run under the harness's own pytest configuration and report through a signed channel
(families/repository/harnesses/repo_checks.py, pytest_run.py).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from flywheel.domains.domain import SandboxNeeds
from flywheel.domains.episodes import SUBMITTED, EpisodeDomain, Step
from flywheel.domains.registry import register_domain
from flywheel.domains.report_channel import harness_report
from flywheel.families.repository.repo_base import BASE_MOUNT, materialized
from flywheel.families.repository.repo_install import install_mounts, shadow_problem
from flywheel.domains.environments import ENV_MOUNT, environment_dir, environment_problem
from flywheel.families.repository.repo_snapshot import (SnapshotError, SnapshotStore, default_store, read_snapshot,
                                            same_store, split_commit)
from flywheel.families.repository.repo_tools import APPLY_PATCH, REPO_TOOLS, RUN_SHELL, RUN_VISIBLE_TESTS, SUBMIT_CHANGES
from flywheel.families.repository.snapshot_paths import files_problem, name_problem, shown
from flywheel.domains.task_paths import PathError, inside_folder
from flywheel.domains.tools import ToolCall, render_call
from flywheel.families.repository.unified_diff import make_diff
from flywheel.sandbox.contract import check_image

_HERE = Path(__file__).resolve().parent
HARNESS = (_HERE / "harnesses" / "repo.py").read_text()
UNIFIED_DIFF = (_HERE / "unified_diff.py").read_text()
HARNESS_SIBLINGS = ("repo_checks.py", "child_channel.py", "pytest_report.py", "pytest_run.py", "apply_chain.py",
                    "visible_tests.py", "import_check.py", "tree_view.py")
HARNESS_FILES = {"harness.py": HARNESS, "unified_diff.py": UNIFIED_DIFF,
                 **{name: (_HERE / "harnesses" / name).read_text() for name in HARNESS_SIBLINGS}}
REPORT_MARKER = "FLYWHEEL-REPO "
# A call's report carries its changes as splices (harnesses/tree_view.py): a line edited in a
# 1 MB module is one line, but a command may rewrite whole files, so the harness's stdout (the
# report, and nothing the repository's code writes) may use this much; the harness keeps its
# report within REPORT_BYTES, naming what did not fit. The observation is bounded apart.
OUTPUT_BYTES = 8 << 20
REPORT_BYTES = OUTPUT_BYTES - (64 << 10)
OBSERVATION_CHARS = 24_000  # what the model sees of one call, whatever the harness sent
# Beyond the harness's test tree (every file under a test/tests/testing folder, every
# conftest.py, every test module: repo_checks.in_test_tree), what the scorer puts back; pytest's
# configuration files need no entry: the trusted run reads none the response wrote.
PROTECTED = ("sitecustomize.py", "usercustomize.py", "*.pth")
CHECK_FIELDS = ("id", "module", "call", "expect")
PYTEST_CHECK_FIELDS = ("id", "pytest")
LOG_CHARS = 200
OUTSIDE_KEPT = 20  # outside paths an episode state remembers (enough to flag and show)


def snapshot_files(task: dict[str, Any]) -> dict[str, str]:
    """The repository snapshot of `task`, path -> text: inline, or by digest from the user's
    store (never a store the task names; verified on each read)."""
    repo = task["repo"]
    if "snapshot" in repo:
        return SnapshotStore(default_store()).get(repo["snapshot"])
    return repo["files"]


# A task's own `limits`: the keys it may set, each with its bounds (the trusted side stays bounded).
TASK_LIMITS = {"timeout_s": (1.0, 3600.0), "memory_mb": (128, 65536), "disk_mb": (16, 65536),
               "processes": (8, 4096)}


PYTEST_CHECK_S = 0.2  # each pytest check's share of the default timeout


def default_timeout(task: dict[str, Any], base: float) -> float:
    """The timeout of `task`'s calls when its `limits` name none: the domain's `base` plus
    PYTEST_CHECK_S per pytest check, so a SWE-bench row's 543 PASS_TO_PASS tests get about two
    minutes, not the built-in suite's 10 s (module checks, evaluated together in one child in
    milliseconds, add nothing); at most TASK_LIMITS' bound."""
    checks = [c for group in ("hidden_tests", "regression_tests") for c in task.get(group) or []
              if isinstance(c, dict) and "pytest" in c]
    return round(min(TASK_LIMITS["timeout_s"][1], base + PYTEST_CHECK_S * len(checks)), 1)


def limits_problem(limits: Any) -> str | None:
    """Why a task's `limits` field is unusable, or None."""
    if not isinstance(limits, dict):
        return "field `limits` must be an object of sandbox limits"
    for key, value in limits.items():
        if key not in TASK_LIMITS:
            return f"field `limits`: unknown key {key!r} (known: {', '.join(TASK_LIMITS)})"
        low, high = TASK_LIMITS[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            return f"field `limits.{key}` must be a number from {low} to {high}, got {value!r}"
    return None


def store_snapshot(repo: str | dict, folder: str | None) -> dict[str, Any]:
    """`repo` as {"path": P} or P (a folder, archive or REPO@COMMIT inside `folder`, the task
    file's, else the working directory for a row no task file reader placed) read and put in
    the user's store: the stored form of `repo`."""
    source = repo if isinstance(repo, str) else repo["path"]
    if not isinstance(source, str):
        raise SnapshotError("field `repo.path` must be a path")
    path, commit = split_commit(source)
    real = inside_folder(folder or "", path, "repo.path")
    snap = read_snapshot(real if commit is None else f"{real}@{commit}")
    root = default_store()
    return {"snapshot": SnapshotStore(root).put(snap.files), "store": root,
            "file_count": len(snap.files)}


def store_problem(store: Any) -> str | None:
    """Why a row's `repo.store` is refused, or None when it names the user's own store. The store
    is the user's setting: a row naming its own would make this machine read (or probe) a path
    or bucket the task file chose, so it is refused, not followed nor silently replaced."""
    mine = default_store()
    if isinstance(store, str) and same_store(store, mine):
        return None
    return (f"field `repo.store`: the row names its own snapshot store ({str(store)[:200]!r}); "
            f"snapshots are read only from your store ($FLYWHEEL_SNAPSHOT_STORE, now {mine!r}), "
            f"never from one a task names: drop the field, or point FLYWHEEL_SNAPSHOT_STORE there "
            f"if you trust that store")


def repo_problem(repo: Any) -> tuple[dict[str, str], str | None]:
    """(the snapshot's files, None) or ({}, why field `repo` is unusable)."""
    if isinstance(repo, dict) and isinstance(repo.get("unreadable"), str):
        return {}, repo["unreadable"]
    if isinstance(repo, dict) and "snapshot" in repo:
        if "store" in repo and store_problem(repo["store"]):
            return {}, store_problem(repo["store"])
        try:
            return SnapshotStore(default_store()).get(repo["snapshot"]), None
        except SnapshotError as e:
            return {}, f"field `repo.snapshot`: {e}"
    if not isinstance(repo, dict) or not isinstance(repo.get("files"), dict):
        return {}, ("field `repo` must be {\"files\": {path: text}} or "
                    "{\"snapshot\": DIGEST}")
    why = files_problem(repo["files"])
    if why:
        return {}, f"field `repo.files`: {why}"
    return repo["files"], None


def check_missing(check: Any) -> list[str]:
    """The fields a hidden/regression check lacks (a module check, or a pytest node id)."""
    if not isinstance(check, dict):
        return list(CHECK_FIELDS)
    shape = PYTEST_CHECK_FIELDS if "pytest" in check else CHECK_FIELDS
    return [f for f in shape if f not in check]


def tree(task: dict[str, Any], changes: dict[str, str | None]) -> dict[str, str]:
    """The snapshot with `changes` applied (None: deleted)."""
    files = dict(snapshot_files(task))
    for path, text in changes.items():
        if text is None:
            files.pop(path, None)
        else:
            files[path] = text
    return files


def apply_delta(base: dict[str, str], changes: dict[str, str | None], delta: dict
                ) -> tuple[dict, list[str]]:
    """(`changes` updated by one call's `delta`, notes on what was not kept). Each changed file
    comes as a splice of its text before the call (harnesses/tree_view.py), applied to that
    text here and kept only when the digest of the result is the one the harness sent; a path
    is kept only under the snapshot name rule (snapshot_paths.py) and when the tree can hold
    it (no file that is also a folder). The changes stay minimal: a file back to its snapshot
    text is no change."""
    out, notes = dict(changes), []
    changed, deleted = delta.get("changed") or {}, delta.get("deleted") or []
    if not isinstance(changed, dict) or not isinstance(deleted, list):
        return out, ["note: the call's changes were not readable; none kept"]
    for path in deleted:
        if not isinstance(path, str) or name_problem(path):
            continue  # never a name the state holds
        if path in base:
            out[path] = None
        else:
            out.pop(path, None)
    names = None
    for path, splice in changed.items():
        why = name_problem(path)
        old = out[path] if path in out else base.get(path)
        if why is None and old is None:  # a new file: the tree must be able to hold it
            names = names if names is not None else {p for p in (*base, *out) if out.get(p, base.get(p)) is not None}
            why = tree_conflict(path, names)
        if why is None:
            new, why = spliced(old or "", splice)
        if why is not None:
            notes.append(f"note: {shown(path)} not kept ({why})")
            continue
        if base.get(path) == new:
            out.pop(path, None)
        else:
            out[path] = new
        if names is not None:
            names.add(path)
    return out, notes


def spliced(old: str, splice: object) -> tuple[str, str | None]:
    """(the text `splice` makes of `old`, None) or ("", why it does not apply)."""
    if not isinstance(splice, dict):
        return "", "its change is not a splice"
    at, cut, text, sha = (splice.get(k) for k in ("at", "cut", "text", "sha256"))
    if at is None and cut is None:  # the whole text
        at, cut = 0, len(old)
    if not (type(at) is int and type(cut) is int and isinstance(text, str) and isinstance(sha, str)
            and 0 <= at <= len(old) and 0 <= cut <= len(old) - at):
        return "", "its change is not a splice of its text"
    new = old[:at] + text + old[at + cut:]
    if hashlib.sha256(new.encode("utf-8", "surrogatepass")).hexdigest() != sha:
        return "", "its change does not give the text the harness reported"
    return new, None


def tree_conflict(path: str, names: set[str]) -> str | None:
    """Why a tree holding the files `names` cannot also hold file `path`, or None."""
    head = path
    while "/" in head:
        head = head.rpartition("/")[0]
        if head in names:
            return f"it lies under {head}, which is a file"
    prefix = path + "/"
    if any(name.startswith(prefix) for name in names):
        return "it is a folder of other files"
    return None


def call_summary(call: ToolCall) -> str:
    """One line of the episode's command log."""
    args = {k: v if not isinstance(v, str) or len(v) <= 80 else v[:80] + "..." for k, v in call.arguments.items()}
    return f"{call.name} {json.dumps(args)}"[:LOG_CHARS]


@register_domain
class RepoDomain(EpisodeDomain):
    """Repository-level coding episodes over tens of turns (tasks from files: --tasks)."""

    name = "repo"
    verifier = "repo_tests"
    description = "your own repository tasks (--tasks FILE: prompt, repo, visible/hidden/regression tests)"
    report_marker = REPORT_MARKER
    sandbox = SandboxNeeds(language="python", timeout_s=10.0, memory_mb=1024,
                           files=("harness.py", "unified_diff.py", *HARNESS_SIBLINGS))
    tools = REPO_TOOLS
    submit_tool = SUBMIT_CHANGES
    plain_tool = APPLY_PATCH.name  # a response without a tool call is a diff: a one-step episode
    max_turns = 30
    max_new_tokens = 512
    log_bytes = 3000
    required_fields = ("task_id", "prompt", "repo", "hidden_tests")
    environment: str | None = None  # every task's environment, unless a task names its own
    image: str | None = None        # every task's docker image, unless a task names its own
    empty_answer_is_answer = True   # no change is an empty diff, scored as one (never the last action)

    def task_count(self) -> int | None:
        return 0

    def normalize_task(self, row: dict[str, Any]) -> dict[str, Any]:
        task = dict(row)
        folder = task.pop("_folder", None)  # set by a task format reader: where the task file is
        repo = task.get("repo")
        if isinstance(repo, str) or (isinstance(repo, dict) and "path" in repo):
            try:
                task["repo"] = store_snapshot(repo, folder)
            except (SnapshotError, PathError) as e:  # told by validate_task, naming the field
                task["repo"] = {"unreadable": str(e) if isinstance(e, PathError) else f"field `repo`: {e}"}
        elif isinstance(repo, dict) and "snapshot" in repo and "store" not in repo:
            task["repo"] = {**repo, "store": default_store()}  # where it was read: for the record
        task.setdefault("visible_tests", [])
        task.setdefault("regression_tests", [])
        shown = task["visible_tests"] if isinstance(task["visible_tests"], list) else []
        task.setdefault("protected", list(PROTECTED) + [p for p in shown if isinstance(p, str)])
        task.setdefault("answer", task.get("reference_patch", ""))
        return task

    def validate_task(self, task: dict[str, Any]) -> list[str]:
        problems = super().validate_task(task)
        files, problem = repo_problem(task.get("repo"))
        if problem:
            problems.append(problem)
        for group in ("hidden_tests", "regression_tests"):
            for n, check in enumerate(task.get(group) or []):
                missing = check_missing(check)
                if missing:
                    problems.append(f"field `{group}[{n}]` lacks {', '.join(missing)}")
        if not task.get("hidden_tests"):
            problems.append("field `hidden_tests` must list at least one check")
        if self.environment_of(task) is not None:
            name = self.environment_of(task)
            problems += filter(None, [environment_problem(name) or files and shadow_problem(
                files, (task.get("repo") or {}).get("snapshot"), environment_dir(name), name)])
        if task.get("image") or self.image:
            try:
                check_image(task.get("image") or self.image)
            except ValueError as e:
                problems.append(f"field `image`: {e}")
        if not isinstance(task.get("test_patch", ""), str):
            problems.append("field `test_patch` must be a unified diff (text)")
        if task.get("limits") is not None:
            problems += filter(None, [limits_problem(task["limits"])])
        visible = task.get("visible_tests") or []
        if not isinstance(visible, list):
            return problems + ["field `visible_tests` must be a list of the snapshot's test files"]
        for path in visible:
            if not isinstance(path, str):
                problems.append(f"field `visible_tests`: {str(path)[:80]!r} is not a path (text)")
            elif path not in files:
                problems.append(f"field `visible_tests`: {path!r} is not in the snapshot")
        return problems

    def start_state(self, task: dict[str, Any]) -> dict[str, Any]:
        return {"changes": {}, "log": []}

    def environment_of(self, task: dict) -> str | None:
        """The name of the environment `task`'s calls run with, or None."""
        return task.get("environment") or self.environment

    def limits_of(self, task: dict) -> dict[str, Any]:
        """Every call's sandbox limits: the domain's, a work dir with room for the snapshot twice
        over (the harness copies it there), a timeout that grows with the task's pytest checks
        (default_timeout), then the task's own `limits`."""
        chars = sum(map(len, snapshot_files(task).values()))
        limits = {**self.sandbox.limits(), "disk_mb": max(64, 64 + 2 * (chars >> 20)),
                  "output_bytes": OUTPUT_BYTES}
        limits["timeout_s"] = default_timeout(task, limits["timeout_s"])
        own = task.get("limits")
        if isinstance(own, dict) and limits_problem(own) is None:
            limits.update(own)
        return limits

    def _request(self, task: dict, changes: dict[str, str | None], plan: dict, mode: str,
                 limits: dict) -> dict:
        """The harness's request: an inline snapshot travels whole with the changes laid over
        it (`tree`); a stored one is mounted read-only as a base (repo_base.py) and only the
        changes travel. The task's environment is mounted, its image (or the domain's) named."""
        name = self.environment_of(task)
        mounts = [[environment_dir(name), ENV_MOUNT]] if name else []
        if "snapshot" in task["repo"]:
            base = materialized(snapshot_files(task), task["repo"]["snapshot"])
            mounts.append([base, BASE_MOUNT])
            plan = {**plan, "base": BASE_MOUNT, "changes": changes}
        else:
            plan = {**plan, "tree": tree(task, changes)}
        mounts += install_mounts(snapshot_files(task), task["repo"].get("snapshot"))
        return {"files": dict(HARNESS_FILES),
                "command": ["python", "harness.py", mode], "stdin": json.dumps(plan),
                "limits": limits, "mounts": mounts,
                "image": task.get("image") or self.image}

    def tool_program(self, task: dict, state: dict, call: ToolCall,
                     marker: str = REPORT_MARKER) -> dict | None:
        limits = self.limits_of(task)
        plan = {"marker": marker, "call": {"name": call.name, "arguments": call.arguments},
                "visible_tests": task.get("visible_tests") or [],
                "budget_s": limits["timeout_s"] - 2.0, "log_bytes": self.log_bytes,
                "report_bytes": min(REPORT_BYTES, limits["output_bytes"] - (64 << 10))}
        return self._request(task, state.get("changes") or {}, plan, "tool", limits)

    def observe(self, task: dict, state: dict, call: ToolCall, result) -> Step:
        log = list(state.get("log") or []) + [call_summary(call)]
        report, problem, _ = harness_report(result, REPORT_MARKER)
        if report is None:
            return Step(f"error: the call did not finish: {problem[:300]}", {**state, "log": log}, None, None)
        delta = report.get("delta") if isinstance(report.get("delta"), dict) else {}
        changes, notes = apply_delta(snapshot_files(task), state.get("changes") or {}, delta)
        skipped = delta.get("skipped") if isinstance(delta.get("skipped"), dict) else {}
        notes += [f"note: {shown(path)} not kept ({str(why)[:200]})" for path, why in
                  sorted(skipped.items())[:10]]
        outside = list(state.get("outside") or [])
        if report.get("outside"):
            notes.append("note: files written outside the repository are not kept: "
                         + ", ".join(map(str, report["outside"][:10])))
            if call.name == RUN_SHELL.name:  # the model's own command (a test run's are the task's)
                outside = sorted({*outside, *map(str, report["outside"][:10])})[:OUTSIDE_KEPT]
        observation = str(report.get("observation", ""))
        if len(observation) > OBSERVATION_CHARS:
            observation = observation[:OBSERVATION_CHARS] + f"\n[... {len(observation) - OBSERVATION_CHARS} characters cut]"
        observation = "\n".join([observation] + notes[:20])
        tests = report.get("tests") if call.name == RUN_VISIBLE_TESTS.name else None
        total = (tests or {}).get("passed", 0) + (tests or {}).get("failed", 0)
        reward = tests["passed"] / total if total else None
        return Step(observation, {"changes": changes, "log": log, **({"outside": outside} if outside else {})},
                    None, reward)

    def episode_flags(self, task: dict, state: dict) -> list[str]:
        """`touched_outside` when a shell command wrote outside the repository (and its scratch
        HOME and TMPDIR): nothing there is kept or scored, but it is an attempt on what is not the
        repository's (the harness, the verifier's files), so the episode earns 0."""
        return ["touched_outside"] if state.get("outside") else []

    def submit(self, state: dict, call: ToolCall) -> Step:
        return Step("submitted", state, SUBMITTED)

    def context_anchor(self, task: dict, state: dict) -> str:
        diff = self.final_response(task, state)
        return f"The changes so far (a diff from the snapshot):\n{diff}" if diff else "No changes yet."

    def final_response(self, task: dict, state: dict) -> str:
        return make_diff(snapshot_files(task), state.get("changes") or {})

    def program(self, task: dict, response: str, marker: str = REPORT_MARKER) -> dict:
        limits = self.limits_of(task)
        checks = ([{**c, "group": "hidden"} for c in task["hidden_tests"]]
                  + [{**c, "group": "regression"} for c in task.get("regression_tests") or []])
        plan = {"marker": marker, "patch": response, "checks": checks,
                "test_patch": task.get("test_patch") or "",
                "protected": [p for p in task.get("protected") or PROTECTED if isinstance(p, str)],
                "visible_tests": task.get("visible_tests") or [],
                "budget_s": limits["timeout_s"] - 1.5}
        return self._request(task, {}, plan, "score", limits)

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return task.get("answer") or ""

    def demonstration_turns(self, task: dict, rng) -> list[tuple[str, str | None]]:
        golden = task.get("golden") or []
        if not golden:
            return super().demonstration_turns(task, rng)
        calls = [render_call(ToolCall(c["name"], c.get("arguments") or {})) for c in golden]
        return [(c, "") for c in calls[:-1]] + [(calls[-1], None)]


@register_domain
class RepoBugs(RepoDomain):
    name = "repo_bugs"
    description = ("a small multi-file Python package with a planted defect: read, search, edit, "
                   "run the tests, submit; scored by hidden and regression checks")
    tier = 2

    def task_count(self) -> int | None:
        return None

    def sample_task(self, rng: random.Random) -> dict:
        from flywheel.families.repository.repo_suite import build_task
        task = build_task(rng)
        files = task["repo"]["files"]
        listing = "\n".join(sorted(files))
        task["prompt"] = (f"{task['prompt']}\n\nThe repository's files:\n{listing}\n"
                          f"Visible tests: {', '.join(task['visible_tests'])}")
        fixed = task.pop("fixed_files")
        task["reference_patch"] = make_diff(files, fixed)
        return self.normalize_task(task)
