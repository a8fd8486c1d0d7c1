"""Sandbox side of repository episodes; runs as `python -I harness.py MODE` with the plan on stdin.

The tree is rebuilt in ./repo first: the plan's `tree` (an inline snapshot with the episode's
changes so far) written out, or a stored snapshot mounted read-only at the plan's `base` copied
in (the writable layer) with the plan's `changes` over it; the base's manifest (and the plan's
texts) give each file's digest, so a call's changes are found by hashing only the files whose
stat changed. unified_diff.py and repo_checks.py (the `score` mode and its children) sit beside
this file, loaded by path. Modes:

- `tool`: run one tool call (list, read, search, edit, patch, write, shell, tests) in ./repo, then
  report what it printed and how the tree changed (files changed or added, with their text, and
  files deleted), so the trusted side keeps the episode's state as changes from the snapshot;
- `score`: apply the answer and evaluate the task's checks, pristine tests restored (repo_checks.py);
- `checks`: the checks' evaluator child. The visible tests' runner and the trusted pytest run
  are started through child_channel.py's launcher, from the text read_sources kept.

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
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "repo")
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".git", ".mypy_cache"}
MAX_FILE, MAX_SHOWN = 4 << 20, 20_000            # a file's text the tools handle; an observation
REPORT_BYTES = 60_000                             # a report's size when the plan names no cap
MAX_LIST, MAX_MATCHES = 400, 100
ENV = "/opt/flywheel-env"                         # the task's environment, when it has one
SCRATCH = os.path.join(HERE, ".flywheel", "scratch")  # the commands' HOME and TMPDIR
WATCHED = ("/dev/shm",)                           # writable places beside the work dir, if any


SITE = "/opt/flywheel-site"                      # the repository's own install (repo_install.py)
INSTALL = []                                      # [roots] once read from SITE's install.json


def env_paths():
    """[ENV] when the task's environment is mounted; then, when the repository declares a
    package (families/repository/repo_install.py), SITE (its .dist-info, no code) and its import
    roots in this tree (`src`): what every child puts on sys.path and shells on PYTHONPATH."""
    paths = [ENV] if os.path.isdir(ENV) else []
    if os.path.isdir(SITE):
        if not INSTALL:
            with open(os.path.join(SITE, "install.json"), encoding="utf-8") as f:
                INSTALL.append([r for r in json.load(f).get("roots") or [] if isinstance(r, str)])
        paths += [SITE] + [os.path.join(REPO, r) for r in INSTALL[0]]
    return paths


SIBLINGS = ("unified_diff", "repo_checks", "child_channel", "pytest_report", "pytest_run", "apply_chain",
            "tree_view",
            "visible_tests", "import_check")
SOURCES = {}  # name -> (path, text): this file and its siblings, read before any of the repository runs


def read_sources():
    """Keep this file's and its siblings' text in memory: what the repository's code runs later
    may rewrite the files on disk, so every later load and every child's code comes from here."""
    for name in ("harness", *SIBLINGS):
        path = os.path.abspath(__file__) if name == "harness" else os.path.join(HERE, name + ".py")
        if name not in SOURCES and os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                SOURCES[name] = (path, f.read())


def load_sibling(name):
    """The module `name` beside this file, from the text read_sources kept (the work dir is
    never on sys.path)."""
    read_sources()
    path, source = SOURCES[name]
    module = type(sys)(name)
    module.__file__ = path
    exec(compile(source, path, "exec"), vars(module))  # noqa: S102  our own sibling
    return module


def child_modules(*names):
    """[(name, path, source, register)] for child_channel.py's launcher: this file registered as
    `harness` (what repo_checks.py reads the tree through), the others as given."""
    read_sources()
    return [[name, *SOURCES[name], name == "harness"] for name in names]


def load_unified_diff():
    return load_sibling("unified_diff")


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
    """How the tree changed between two walks: ({path: new text}, [deleted path], {path: why
    not kept}) (links, binary or oversized files are not kept)."""
    news, skipped = {}, {}
    for rel, entry in after.items():
        if before.get(rel) == entry:
            continue
        if entry[0] != "file":
            skipped[rel] = "a symbolic link" if entry[0] == "link" else "not a regular file"
            continue
        text, problem = read_text(os.path.join(REPO, rel), MAX_FILE)
        if text is None:
            skipped[rel] = problem
            continue
        news[rel] = text
    deleted = sorted(rel for rel, entry in before.items() if rel not in after and entry[0] == "file")
    return news, deleted, skipped


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
    names = [rel for rel in plan["view"].listed()
             if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(os.path.basename(rel), pattern)]
    shown = names[:MAX_LIST]
    more = f"\n[... {len(names) - len(shown)} more]" if len(names) > len(shown) else ""
    return ("\n".join(shown) + more) if names else f"no files match {pattern!r}"


def tool_read(args, plan):
    view = plan["view"]
    rel = view.key(args["path"])
    if rel in view.folders():
        return tool_list({"pattern": rel + "/*"}, plan)
    text, problem = view.text(rel, MAX_FILE)
    if text is None:
        raise ValueError(f"{args['path']} cannot be read: {problem}")
    lines = text.splitlines()
    start = max(1, int(args.get("start") or 1))
    end = min(len(lines), int(args.get("end") or len(lines)))
    if not lines:
        return f"{args['path']} is empty"
    width, shown, size = len(str(end)), [], 0
    for n in range(start, end + 1):
        line = f"{n:>{width}}| {lines[n - 1]}"
        if size + len(line) > MAX_SHOWN - 300:  # the rest is the model's to ask for by range
            if not shown:  # one line longer than an observation: its start
                shown.append(line[:MAX_SHOWN - 300] + " [... line cut]")
                n += 1
            if n <= end:
                shown.append(f"[... lines {n}-{end} not shown (over {MAX_SHOWN} characters): "
                             f"read them with start/end]")
            break
        shown.append(line)
        size += len(line) + 1
    return f"{args['path']} (lines {start}-{end} of {len(lines)})\n" + "\n".join(shown)


def tool_search(args, plan):
    try:
        pattern = re.compile(args["pattern"])
    except re.error as e:
        raise ValueError(f"the pattern is not a regular expression: {e}") from None
    view, where = plan["view"], args.get("path") or "*"
    hits, files = [], 0
    for rel in view.listed():
        if not (fnmatch.fnmatch(rel, where) or rel.startswith(where.rstrip("/") + "/")):
            continue
        text, _ = view.text(rel, MAX_FILE)
        if text is None:
            continue
        files += 1
        if not pattern.search(text):  # one pass in C; lines only where it matches
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{rel}:{n}: {line.strip()[:200]}")
                if len(hits) > MAX_MATCHES:
                    return "\n".join(hits[:MAX_MATCHES]) + "\n[... more matches; narrow the search]"
    return "\n".join(hits) if hits else f"no match for {args['pattern']!r} in {files} files"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.islink(path):
        os.unlink(path)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def tool_edit(args, plan):
    view = plan["view"]
    rel = view.key(args["path"])
    text, problem = view.text(rel, MAX_FILE)
    if text is None:
        raise ValueError(f"{args['path']}: {problem}")
    count = text.count(args["old"]) if args["old"] else 0
    if count != 1:
        raise ValueError(f"{args['path']}: `old` occurs {count} times; it must occur exactly once "
                         "(copy it exactly, with more lines around it to make it unique)")
    view.put(rel, text.replace(args["old"], args["new"], 1))
    return f"edited {args['path']}"


def tool_write(args, plan):
    view = plan["view"]
    if not isinstance(args["content"], str):
        raise ValueError("`content` must be text")
    view.put(view.key(args["path"]), args["content"])
    return f"wrote {args['path']} ({len(args['content'])} characters)"


def tool_patch(args, plan):
    ud, view = load_unified_diff(), plan["view"]
    files = {}
    for path in ud.changed_paths(args["patch"]):
        rel = view.key(path)
        if rel in view.names:
            text, problem = view.text(rel, MAX_FILE)
            if text is None:
                raise ValueError(f"{path}: {problem}")
            files[rel] = text
    changes = ud.apply_diff(files, args["patch"])
    for rel, text in sorted(changes.items(), key=lambda c: c[1] is not None):  # deletions first
        view.remove(view.key(rel)) if text is None else view.put(view.key(rel), text)
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


def run_logged(argv, budget_s, log_bytes, cwd=REPO, stdin=None, pass_fds=(), env=None, on_start=None):
    """(exit code or None on timeout, the output's tail): `argv` in its own session, killed with
    whatever it started when it ends or runs out of time. `pass_fds` are inherited, `env`
    replaces shell_env(), `on_start()` runs once the child exists."""
    log_path = os.path.join(os.path.dirname(REPO), ".flywheel", "log.txt")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL if stdin is None else stdin,
                                stdout=log, stderr=log, close_fds=True, start_new_session=True,
                                env=shell_env() if env is None else env, pass_fds=pass_fds)
        if on_start is not None:
            on_start()
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
    files = {p.split("::")[0] for p in plan["visible_tests"]}  # a file, or a node id in one
    unknown = [p for p in wanted if p not in plan["visible_tests"] and p.split("::")[0] not in files]
    if unknown:
        raise ValueError(f"not a visible test file: {', '.join(unknown)[:200]}; "
                         f"they are {', '.join(plan['visible_tests'])[:300]}")
    code, out, counts = visible_counts(wanted, plan["budget_s"], plan["log_bytes"])
    if counts is not None:  # the runner's own accounting, never a line it printed
        PLAN_TESTS.update(counts)
    status = "timed out" if code is None else ""
    return out + (f"\n[{status}]" if status else "")


def visible_counts(paths, budget_s, log_bytes):
    """(exit code, output, {"passed", "failed"} or None): the visible tests (files or node ids)
    run by pytest (visible_tests.py) in a child whose counts come back signed
    (child_channel.py); None when the runner sent none, or when something else wrote to its
    channel."""
    channel = load_sibling("child_channel")
    code, out, records, forged = channel.run_child(
        sys.modules[__name__], child_modules("harness", "child_channel", "pytest_run", "visible_tests"),
        ("visible_tests", "serve"), {"paths": list(paths)}, budget_s, log_bytes)
    counts = [r for r in records if r.get("kind") == "counts"]
    if forged or len(counts) != 1:
        return code, out, None
    return code, out, {k: int(counts[0][k]) for k in ("passed", "failed")}


PLAN_TESTS = {}
TREELESS = {"list_files", "read_file", "search", "edit_file", "write_file", "apply_patch"}  # run no code
TOOLS = {"list_files": tool_list, "read_file": tool_read, "search": tool_search,
         "edit_file": tool_edit, "write_file": tool_write, "apply_patch": tool_patch,
         "run_shell": tool_shell, "run_visible_tests": tool_tests}


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
    """One call and its report. A tool that runs no code works on the plan's view alone (known
    is None: no tree was written); a command runs in the written tree, whose walk finds what
    it changed. Changes come back as splices (tree_view.delta) within the plan's `report_bytes`."""
    call, view = plan["call"], plan["view"]
    outside = outside_entries()
    error = None
    try:
        observation = TOOLS[call["name"]](call["arguments"], plan)
    except Exception as e:  # noqa: BLE001  a bad call is the model's: an error observation
        observation, error = f"error: {e}", str(e)[:500]
    if len(observation) > MAX_SHOWN:
        observation = observation[:MAX_SHOWN] + f"\n[... {len(observation) - MAX_SHOWN} characters cut]"
    if known is None:
        news = {rel: text for rel, text in view.news.items() if text is not None}
        deleted = sorted(rel for rel, text in view.news.items() if text is None)
        news, deleted = ({}, []) if error else (news, deleted)  # a failed call changes nothing
        skipped = {}
        for rel in [r for r in news if not view.kept(r)]:
            skipped[rel] = "in a folder (or a kind of file) the harness does not keep"
            del news[rel]
    else:
        before = {rel: entry for rel, (_, entry) in known.items()}
        news, deleted, skipped = tree_delta(before, walk(REPO, known))
    report = {"observation": observation, "error": error, "outside": touched(outside, outside_entries())}
    if PLAN_TESTS:
        report["tests"] = dict(PLAN_TESTS)
    budget = int(plan.get("report_bytes") or REPORT_BYTES) - len(json.dumps(report)) - 512
    report["delta"] = view.delta(news, deleted, skipped, budget)
    return report


def main():
    mode = sys.argv[1]
    read_sources()
    sys.modules["harness"] = sys.modules[__name__]  # what repo_checks.py reads the tree through
    if mode in ("score", "checks"):
        checks = load_sibling("repo_checks")
        if mode == "checks":
            return checks.serve_checks()
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, before any of the repository runs
    plan = json.loads(sys.stdin.read())
    os.makedirs(os.path.join(os.path.dirname(REPO), ".flywheel"), exist_ok=True)
    os.makedirs(REPO, exist_ok=True)
    start = time.monotonic()
    if mode == "tool":
        plan["view"] = load_sibling("tree_view").View(sys.modules[__name__], plan)
    treeless = mode == "tool" and plan["call"]["name"] in TREELESS
    known = None if treeless else rebuild(plan)  # the tree is written only for code to run in
    plan.pop("tree", None)
    rebuilt = time.monotonic() - start
    report = run_tool(plan, known) if mode == "tool" else checks.score(plan, known)
    report["rebuild_ms"] = round(rebuilt * 1000, 3)  # the tree from snapshot + changes
    sys.stdout.write("\n" + plan["marker"] + json.dumps(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
