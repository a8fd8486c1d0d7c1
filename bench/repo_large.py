"""A large repository's per-call costs: 5,000 files and 50 MB, with a 1 MB module among them.

    python bench/repo_large.py [--files 5000] [--mb 50] [--module-kb 1024] [--repeat 9] [--seed 0]

Builds a synthetic Python package offline (deterministic from --seed: --files modules of
filler functions, one of --module-kb KB, a small visible test file), stores it as a snapshot
(the `{"snapshot": DIGEST}` form a SWE-bench row uses) and times, on the local sandbox (warm
pool), each kind of call of a repository episode through the `repo` domain's step: list_files,
read_file (a range of the big module), search (a regular expression over the whole tree),
edit_file of the big module, run_shell (a command that edits the big module), and the visible
tests (run_visible_tests). Beside each: the same operation as plain Python on a temp dir (no
sandbox, no snapshot: the baseline; the tests through `python -m pytest` when pytest is
installed, else unittest). Prints median and p95 ms of --repeat calls, the ratio to the
baseline, the snapshot's materialization (first use on a machine) and the size of each call's
report. A call that does not finish prints its error instead of a time.

Run it with another checkout's interpreter to measure that checkout: the before/after figures
of issue 38 come from `V/bin/python bench/repo_large.py` with V a venv holding the commit before.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call
from flywheel.families.repository.repo_snapshot import SnapshotStore
from flywheel.sandbox import get_backend

BIG = "pkg/big_module.py"
TEST = "tests/test_small.py"
TEST_TEXT = ("import unittest\n\nfrom pkg.core import answer\n\n\n"
             "class TestAnswer(unittest.TestCase):\n"
             "    def test_answer(self):\n        self.assertEqual(answer(), 42)\n\n"
             "    def test_again(self):\n        self.assertTrue(answer() > 0)\n")


def filler(rng: random.Random, size: int, tag: str) -> str:
    """Python source of about `size` bytes: numbered functions, distinct per file."""
    out, n = [f'"""Module {tag}."""\n\n'], 0
    total = len(out[0])
    while total < size:
        body = (f"def {tag}_f{n}(x, y={rng.randint(0, 999)}):\n"
                f"    \"\"\"Return a mix of x and y ({rng.random():.6f}).\"\"\"\n"
                f"    value = x * {rng.randint(1, 99)} + y\n"
                f"    return value % {rng.randint(2, 997)}\n\n\n")
        out.append(body)
        total, n = total + len(body), n + 1
    return "".join(out)


def build(files: int, mb: int, module_kb: int, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    per = max(200, ((mb << 20) - (module_kb << 10)) // max(1, files - 4))
    tree = {"pkg/__init__.py": "", "pkg/core.py": "def answer():\n    return 42\n",
            BIG: filler(rng, module_kb << 10, "big"), TEST: TEST_TEXT, "tests/__init__.py": ""}
    for i in range(files - len(tree)):
        tree[f"pkg/sub{i // 100:02d}/mod{i:04d}.py"] = filler(rng, per, f"m{i}")
    for d in {p.rpartition("/")[0] for p in tree if p.startswith("pkg/sub")}:
        tree[d + "/__init__.py"] = ""
    return tree


def timed(fn, repeat: int) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1000)
    return times, out


def summary(times: list[float] | None) -> tuple[str, str]:
    if not times:
        return "-", "-"
    ordered = sorted(times)
    return f"{statistics.median(ordered):.1f}", f"{ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]:.1f}"


def middle_line(text: str) -> str:
    """A line that occurs once in `text`, near its middle (what the edits toggle)."""
    lines = text.splitlines()
    return next(x for x in lines[len(lines) // 2:] if x.startswith("def ") and lines.count(x) == 1)


def sandbox_ops(task, domain, sandbox, big_text):
    """name -> (calls to make in turn, each (name, arguments)); the edits toggle a line back and
    forth so every call changes the file."""
    line = middle_line(big_text)
    marked = line + "  # edited"
    return {
        "list_files": [("list_files", {"pattern": "*.py"})],
        "read_file": [("read_file", {"path": BIG, "start": 100, "end": 160})],
        "search": [("search", {"pattern": r"def big_f1[0-9]\b"})],
        "edit_file (1 MB)": [("edit_file", {"path": BIG, "old": line, "new": marked}),
                             ("edit_file", {"path": BIG, "old": marked, "new": line})],
        "run_shell (sed 1 MB)": [("run_shell", {"command": f"sed -i 's/big_f7(/big_f7 (/' {BIG}"}),
                                 ("run_shell", {"command": f"sed -i 's/big_f7 (/big_f7(/' {BIG}"})],
        "run_visible_tests": [("run_visible_tests", {})],
    }


def baseline_ops(root: str, big_text: str):
    line = middle_line(big_text)
    big = os.path.join(root, BIG)
    flip = [line, line + "  # edited"]

    def listing():
        return [os.path.relpath(os.path.join(h, n), root) for h, _, ns in os.walk(root) for n in ns
                if n.endswith(".py")][:400]

    def read():
        with open(big, encoding="utf-8") as f:
            return f.read().splitlines()[99:160]

    def search():
        pattern, hits = re.compile(r"def big_f1[0-9]\b"), []
        for here, _, names in os.walk(root):
            for name in names:
                with open(os.path.join(here, name), encoding="utf-8") as f:
                    hits += [n for n, text in enumerate(f, 1) if pattern.search(text)]
        return hits

    def edit():
        with open(big, encoding="utf-8") as f:
            text = f.read()
        with open(big, "w", encoding="utf-8") as f:
            f.write(text.replace(flip[0], flip[1], 1))
        flip.reverse()

    def shell():
        subprocess.run(["sed", "-i", "s/big_f7(/big_f7 (/", big], check=True)
        subprocess.run(["sed", "-i", "s/big_f7 (/big_f7(/", big], check=True)

    try:
        import pytest  # noqa: F401
        runner = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST]
    except ImportError:
        runner = [sys.executable, "-m", "unittest", "tests.test_small"]

    def tests():
        subprocess.run(runner, cwd=root, capture_output=True, check=False)

    return {"list_files": listing, "read_file": read, "search": search, "edit_file (1 MB)": edit,
            "run_shell (sed 1 MB)": shell, "run_visible_tests": tests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--module-kb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import flywheel.families.repository.repo as repo_module
    print(f"flywheel from {os.path.dirname(repo_module.__file__)}")
    start = time.perf_counter()
    files = build(args.files, args.mb, args.module_kb, args.seed)
    size = sum(len(t.encode()) for t in files.values())
    print(f"repository: {len(files)} files, {size / 2**20:.1f} MiB, {BIG} {len(files[BIG]) / 1024:.0f} KiB "
          f"(built in {time.perf_counter() - start:.1f} s, seed {args.seed})")
    work = tempfile.mkdtemp(prefix="flywheel-bench-large-")
    cache = os.path.join(work, "cache")
    os.mkdir(cache)
    os.chmod(work, 0o755)
    os.chmod(cache, 0o755)
    os.environ["FLYWHEEL_SNAPSHOT_CACHE"] = cache
    os.environ["FLYWHEEL_SNAPSHOT_STORE"] = os.path.join(work, "store")
    try:
        start = time.perf_counter()
        digest = SnapshotStore(os.environ["FLYWHEEL_SNAPSHOT_STORE"]).put(files)
        stored_s = time.perf_counter() - start
        domain = get_domain("repo")
        task = domain.normalize_task({
            "task_id": "large", "domain": "repo", "prompt": "bench",
            "repo": {"snapshot": digest, "file_count": len(files)}, "visible_tests": [TEST],
            "hidden_tests": [{"id": "h", "module": "pkg.core", "call": "answer()", "expect": 42}],
            "limits": {"timeout_s": 60}})
        from flywheel.families.repository.repo_base import materialized
        start = time.perf_counter()
        materialized(files, digest)
        print(f"snapshot stored in {stored_s:.2f} s; materialized (first use on this machine) in "
              f"{time.perf_counter() - start:.2f} s")
        rows = []
        with get_backend("local") as sandbox:
            runner = ToolRunner(sandbox)
            state = domain.start_state(task)
            for name, calls in sandbox_ops(task, domain, sandbox, files[BIG]).items():
                times, error, i = [], None, 0
                for _ in range(args.repeat):
                    call = calls[i % len(calls)]
                    i += 1
                    t0 = time.perf_counter()
                    step = domain.step(task, state, render_call(ToolCall(*call)), runner)
                    times.append((time.perf_counter() - t0) * 1000)
                    if step.observation.startswith("error"):
                        error = step.observation.splitlines()[0][:110]
                        break
                    state = step.state
                rows.append((name, None if error else times, error, len(step.observation)))
        base_root = os.path.join(work, "plain")
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(base_root, rel)), exist_ok=True)
            with open(os.path.join(base_root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        plain = baseline_ops(base_root, files[BIG])
        print(f"\n{'call':<22}{'sandbox median':>15}{'p95':>9}{'plain median':>14}{'p95':>9}"
              f"{'ratio':>8}{'obs chars':>11}")
        for name, times, error, shown in rows:
            base, _ = timed(plain[name], args.repeat)
            med, p95 = summary(times)
            bmed, bp95 = summary(base)
            ratio = f"{statistics.median(times) / statistics.median(base):.0f}x" if times else "-"
            print(f"{name:<22}{med:>15}{p95:>9}{bmed:>14}{bp95:>9}{ratio:>8}{shown:>11}")
            if error:
                print(f"    {error}")
        changed = sorted((state.get("changes") or {}).items())
        print(f"\nthe episode's state: {len(changed)} changed files "
              f"({', '.join(f'{p}: {len(t or chr(0)) / 1024:.0f} KiB' for p, t in changed)})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
