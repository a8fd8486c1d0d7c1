"""Rebuild the real-repository suite (tasks.jsonl and repos/*.tar.gz) offline from release sdists.

    python bench/real_repos/build.py --download        # pip download the sdists and wheels once
    python bench/real_repos/build.py [--only ID ...]   # rebuild the rows from the local cache

Each row of pairs.py is a bug fix between two consecutive releases of a public Python package
(SWE-bench's form): the snapshot is the older release's package and test folders (plus its
pyproject.toml/setup.* so it can be installed), `patch` the newer release's change to the files
the row names (the fix), `test_patch` the newer release's change to its test files. The builder
runs pytest on the older release with the test_patch applied, and again with the patch applied
too (the wheels in wheels/ installed into a scratch folder, as `flywheel env build` installs
them), and writes FAIL_TO_PASS (failing before, passing after) and PASS_TO_PASS (passing both
times) as JSON strings, as SWE-bench publishes them. These are the packages' own release tests,
run as their developers run them; model code never runs here.

The cache is $FLYWHEEL_REAL_REPOS_CACHE, else ~/.cache/flywheel/real-repos (sdists/, nothing
else); the wheelhouse (pytest and what it needs) is kept in the repository, in wheels/.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pairs import PAIRS, Pair  # noqa: E402
from statements import STATEMENTS  # noqa: E402

KEEP_FILES = ("pyproject.toml", "setup.py", "setup.cfg")
SKIP_PARTS = ("__pycache__",)
PLUGIN = '''
import json, os
OUT = {}
def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        old = OUT.get(report.nodeid)
        if old in (None, "passed") or report.outcome == "failed":
            OUT[report.nodeid] = "xfailed" if getattr(report, "wasxfail", None) and report.skipped else report.outcome
def pytest_sessionfinish(session):
    with open(os.environ["OUTCOMES_FILE"], "w") as f:
        json.dump(OUT, f)
'''


def cache_dir() -> str:
    return os.path.expanduser(os.environ.get("FLYWHEEL_REAL_REPOS_CACHE") or "~/.cache/flywheel/real-repos")


def sdist_path(pair: Pair, version: str) -> str:
    folder = os.path.join(cache_dir(), "sdists")
    stem = f"{pair.dist}-{version}".lower().replace("-", "_")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.lower().replace("-", "_").startswith(stem + ".tar") or name.lower().replace("-", "_") == stem + ".zip":
            return os.path.join(folder, name)
    raise FileNotFoundError(f"no sdist of {pair.dist} {version} in {folder}: run build.py --download")


def download() -> None:
    """pip download every release the pairs name (sdists, no dependencies) into the cache."""
    folder = os.path.join(cache_dir(), "sdists")
    os.makedirs(folder, exist_ok=True)
    env = {**os.environ, "PIP_CONSTRAINT": ""}  # a machine's pins must not refuse old releases
    for dist in sorted({p.dist for p in PAIRS}):  # sdists of the package, wheels of its build tools
        specs = sorted({f"{dist}=={v}" for p in PAIRS if p.dist == dist for v in (p.old, p.new)})
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", dist,
                        "-d", folder, *specs], check=True, env=env)


def read_sdist(pair: Pair, version: str) -> dict[str, str]:
    """The kept text files of one release (path below its top folder -> text)."""
    files = {}
    with tarfile.open(sdist_path(pair, version)) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")[1:]
            path = "/".join(parts)
            if not member.isfile() or not parts or any(p in SKIP_PARTS for p in parts):
                continue
            if not (path in KEEP_FILES or any(path.startswith(k.rstrip("/") + "/") for k in pair.keep)):
                continue
            if path.endswith(pair.skip) and not under(path, pair.source):
                continue
            data = tar.extractfile(member).read()
            try:
                files[path] = data.decode("utf-8")
            except UnicodeDecodeError:
                continue  # the snapshot holds text files only
    return files


def under(path: str, paths) -> bool:
    return any(path == q or path.startswith(q.rstrip("/") + "/") for q in paths)


def overlay(base: dict[str, str], new: dict[str, str], paths) -> dict[str, str]:
    """`base` with its files under `paths` replaced by `new`'s (deleted where `new` lacks them)."""
    return {**{p: t for p, t in base.items() if not under(p, paths)},
            **{p: t for p, t in new.items() if under(p, paths)}}


def diff(old: dict[str, str], new: dict[str, str], paths, exclude=()) -> str:
    """The unified diff (git's form) from `old` to `new` of the files under `paths`, less `exclude`."""
    from flywheel.families.repository.unified_diff import make_diff
    wanted = {p for p in set(old) | set(new) if under(p, paths) and not under(p, exclude)}
    changes = {p: new.get(p) for p in wanted if old.get(p) != new.get(p)}
    return make_diff({p: old[p] for p in wanted if p in old}, changes) if changes else ""


def write_tree(root: str, files: dict[str, str]) -> None:
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def pytest_outcomes(files: dict[str, str], pair: Pair, env: str, tests: list[str]) -> dict[str, str]:
    """nodeid -> passed/failed/skipped/xfailed of the release's `tests` run on `files`."""
    with tempfile.TemporaryDirectory() as root:
        write_tree(os.path.join(root, "repo"), files)
        with open(os.path.join(root, "outcomes_plugin.py"), "w") as f:
            f.write(PLUGIN)
        repo = os.path.join(root, "repo")
        importable = os.path.join(repo, "src") if os.path.isdir(os.path.join(repo, "src")) else repo
        out = os.path.join(root, "outcomes.json")
        run_env = {**os.environ, "OUTCOMES_FILE": out, "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONPATH": os.pathsep.join([root, env, importable])}
        # the tree's own pytest configuration, less addopts: as the trusted run takes it
        # -S: only the environment and the tree, as in the sandbox (never this interpreter's
        # site-packages, which may hold a test dependency the environment lacks)
        done = subprocess.run([sys.executable, "-S", "-m", "pytest", "-p", "outcomes_plugin", "-q",
                               "-p", "no:cacheprovider", "--rootdir", repo, "-o", "addopts=", *tests],
                              cwd=repo, env=run_env, capture_output=True, text=True, errors="replace",
                              timeout=900)
        if not os.path.exists(out):
            raise RuntimeError(f"pytest did not finish:\n{(done.stdout + done.stderr)[-3000:]}")
        with open(out) as f:
            return json.load(f)


def snapshot_archive(path: str, top: str, files: dict[str, str]) -> None:
    """A deterministic .tar.gz of `files` under `top/` (sorted, mtime 0, owner 0)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data = files[name].encode("utf-8")
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as gz:
        gz.write(buffer.getvalue())


def build_env(target: str, name: str) -> str:
    """Environment `name` (requirements/NAME.txt from wheels/) in `target`, as `flywheel env
    build NAME --requirements requirements/NAME.txt --wheelhouse wheels` installs it."""
    if not os.path.isdir(target):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links",
                        os.path.join(HERE, "wheels"), "--target", target,
                        "-r", os.path.join(HERE, "requirements", f"{name}.txt")],
                       check=True, env={**os.environ, "PIP_CONSTRAINT": ""})
    return target


def swebench_ids(outcomes: dict[str, str]) -> dict[str, str]:
    """The outcomes by id as SWE-bench's log parser reads them: an id cut at its first blank
    (a parametrization holding a space), one outcome per cut id (passed only if all passed)."""
    cut = {}
    for node, outcome in outcomes.items():
        key = node.split(" ", 1)[0]
        cut[key] = outcome if cut.get(key, outcome) == outcome else "failed"
    return cut


def build_row(pair: Pair, env: str) -> tuple[dict, dict[str, str]]:
    old, new = read_sdist(pair, pair.old), read_sdist(pair, pair.new)
    patch = diff(old, new, pair.source, exclude=pair.tests)
    test_patch = diff(old, new, pair.tests)
    if not patch or not test_patch:
        raise ValueError(f"{pair.instance_id}: no change in {pair.source if not patch else pair.tests}")
    tested = overlay(old, new, pair.tests)
    fixed = overlay(tested, {p: t for p, t in new.items() if not under(p, pair.tests)},
                    [p for p in set(old) | set(new) if under(p, pair.source) and not under(p, pair.tests)])
    test_files = list(pair.run) or [p for p in pair.tests if p in tested
                                    and os.path.basename(p).startswith("test")]
    before = pytest_outcomes(tested, pair, env, test_files)
    after = pytest_outcomes(fixed, pair, env, test_files)
    before, after = swebench_ids(before), swebench_ids(after)
    ok = ("passed", "xfailed")
    fail_to_pass = sorted(n for n, o in after.items() if o in ok and before.get(n) not in ok)
    pass_to_pass = sorted(n for n, o in after.items() if o in ok and before.get(n) in ok
                          and not n.startswith(pair.drop or ("\0",)))
    if len(pass_to_pass) > pair.max_p2p:  # evenly spread over the files' tests, deterministic
        step = len(pass_to_pass) / pair.max_p2p
        pass_to_pass = [pass_to_pass[int(i * step)] for i in range(pair.max_p2p)]
    if pair.only_f2p:
        fail_to_pass = [n for n in fail_to_pass if any(k in n for k in pair.only_f2p)]
    if not fail_to_pass:
        raise ValueError(f"{pair.instance_id}: no test fails before the fix and passes after "
                         f"(before: {summary(before)}; after: {summary(after)})")
    row = {"instance_id": pair.instance_id, "repo": pair.repo, "base_commit": pair.old,
           "patch": patch, "test_patch": test_patch, "problem_statement": STATEMENTS[pair.instance_id],
           "hints_text": "", "created_at": pair.created_at, "version": ".".join(pair.old.split(".")[:2]),
           "FAIL_TO_PASS": json.dumps(fail_to_pass), "PASS_TO_PASS": json.dumps(pass_to_pass),
           "environment_setup_commit": pair.old, "environment": pair.environment,
           "limits": {"timeout_s": pair.timeout_s}}
    return row, old


def attempt(pair: Pair, env: str):
    """(row, snapshot files), or (None, why not)."""
    try:
        return build_row(pair, env)
    except (ValueError, RuntimeError, FileNotFoundError, subprocess.TimeoutExpired) as e:
        return None, str(e)[:2000]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--download", action="store_true", help="pip download the sdists first")
    parser.add_argument("--only", nargs="*", help="rebuild only these instance ids (keep the others' rows)")
    parser.add_argument("--out", default=HERE, help="where tasks.jsonl and repos/ go (default: here)")
    parser.add_argument("--jobs", type=int, default=2, help="rows built at once")
    parser.add_argument("--statements", action="store_true",
                        help="only rewrite the rows' problem statements from statements.py")
    args = parser.parse_args(argv)
    if args.download:
        download()
    if args.statements:
        return rewrite_statements(os.path.join(args.out, "tasks.jsonl"))
    tasks = os.path.join(args.out, "tasks.jsonl")
    rows = {}
    if args.only and os.path.exists(tasks):
        with open(tasks) as f:
            rows = {r["instance_id"]: r for r in map(json.loads, f)}
    os.makedirs(os.path.join(args.out, "repos"), exist_ok=True)
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        for pair in PAIRS:
            build_env(os.path.join(scratch, pair.environment), pair.environment)
        chosen = [p for p in PAIRS if not args.only or p.instance_id in args.only]
        with ThreadPoolExecutor(args.jobs) as pool:  # each row's work is two pytest processes
            built = list(pool.map(lambda p: attempt(p, os.path.join(scratch, p.environment)), chosen))
        for pair, (row, files) in zip(chosen, built):
            if row is None:
                print(f"SKIP {pair.instance_id}: {files}")
                failed += 1
                continue
            snapshot_archive(os.path.join(args.out, "repos", f"{pair.instance_id}.tar.gz"),
                             f"{pair.dist}-{pair.old}", files)
            rows[pair.instance_id] = row
            print(f"{pair.instance_id}: {len(json.loads(row['FAIL_TO_PASS']))} FAIL_TO_PASS, "
                  f"{len(json.loads(row['PASS_TO_PASS']))} PASS_TO_PASS, patch {len(row['patch'])} "
                  f"chars, largest edited file {max_edited(row, files)} bytes", flush=True)
    order = [p.instance_id for p in PAIRS]
    with open(tasks, "w") as f:
        for key in sorted(rows, key=lambda k: order.index(k) if k in order else len(order)):
            f.write(json.dumps(rows[key], sort_keys=True) + "\n")
    print(f"{len(rows)} rows in {tasks}; {failed} skipped")
    return 1 if failed else 0


def rewrite_statements(tasks: str) -> int:
    with open(tasks) as f:
        rows = [json.loads(line) for line in f]
    with open(tasks, "w") as f:
        for row in rows:
            f.write(json.dumps({**row, "problem_statement": STATEMENTS[row["instance_id"]]}, sort_keys=True) + "\n")
    print(f"{len(rows)} problem statements written in {tasks}")
    return 0


def summary(outcomes: dict[str, str]) -> str:
    counts = {}
    for outcome in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "no tests ran"


def max_edited(row: dict, files: dict[str, str]) -> int:
    edited = [line[6:] for line in row["patch"].splitlines() if line.startswith("+++ b/")]
    return max((len(files.get(p, "").encode()) for p in edited), default=0)


if __name__ == "__main__":
    sys.exit(main())
