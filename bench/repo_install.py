"""What a declared package costs a repository task's scoring, and what the visible tests cost as
pytest: side by side in one run on the local sandbox.

    python bench/repo_install.py [--rounds 10]

Scoring: the same flat-layout task with and without a pyproject.toml (with one, the harness
mounts the install folder and probes the package's import before applying the answer,
harnesses/import_check.py). Visible tests: `run_visible_tests` on a 16-test module (a class,
parametrize, a fixture) through pytest. Prints the median wall time of each, in ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call
from flywheel.families.repository.unified_diff import make_diff
from flywheel.sandbox import get_backend

TESTS_DIR = Path(__file__).resolve().parents[1] / "tests" / "families"
sys.path[:0] = [str(TESTS_DIR / "repository"), str(TESTS_DIR)]
from conftest import copy_packages  # noqa: E402  pytest laid out as `flywheel env build` lays it
from test_visible_pytest import TESTS  # noqa: E402  the 16-test module

OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
FILES = {"calc/__init__.py": "", "calc/ops.py": OPS}


def task(files, **extra):
    return get_domain("repo").normalize_task({
        "task_id": "bench", "domain": "repo", "prompt": "p", "repo": {"files": files},
        "hidden_tests": [{"id": "h", "module": "calc.ops", "call": "total([5, 6])", "expect": 11}], **extra})


def median_ms(fn, rounds):
    fn()  # warm: the install folder written, the sandbox's pool started
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def plain_pytest(task_) -> None:
    """`python -m pytest -q` on the task's files in a folder of its own: the baseline."""
    with tempfile.TemporaryDirectory() as folder:
        for rel, text in task_["repo"]["files"].items():
            os.makedirs(os.path.dirname(os.path.join(folder, rel)), exist_ok=True)
            Path(folder, rel).write_text(text)
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                       cwd=folder, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    domain = get_domain("repo")
    plain = task(FILES)
    declared = task({**FILES, "pyproject.toml": '[project]\nname = "calc"\nversion = "1.0"\n'})
    diff = make_diff(FILES, {"calc/ops.py": OPS.replace("-=", "+=")})
    shown = task({**FILES, "tests/test_calc.py": TESTS}, visible_tests=["tests/test_calc.py"],
                 environment="pytest-env")
    call = render_call(ToolCall("run_visible_tests", {}))
    with get_backend("local") as sandbox:
        rows = [("score, no packaging declared", median_ms(lambda: domain.run(sandbox, plain, diff), rounds)),
                ("score, pyproject.toml (install + import probe)",
                 median_ms(lambda: domain.run(sandbox, declared, diff), rounds)),
                ("run_visible_tests, 16 tests through pytest",
                 median_ms(lambda: domain.step(shown, domain.start_state(shown), call, ToolRunner(sandbox)), rounds)),
                ("plain pytest on the same module (no sandbox)", median_ms(lambda: plain_pytest(shown), rounds))]
    for name, ms in rows:
        print(f"{name:<52} {ms:8.1f} ms (median of {rounds})")


if __name__ == "__main__":
    root = tempfile.mkdtemp(prefix="flywheel-bench-cache-")
    os.environ.setdefault("FLYWHEEL_SNAPSHOT_CACHE", os.path.join(root, "cache"))
    os.environ["FLYWHEEL_ENVIRONMENTS"] = os.path.join(root, "envs")  # one with pytest, under /tmp
    os.makedirs(os.path.join(root, "envs", "pytest-env"))
    copy_packages(Path(root) / "envs" / "pytest-env")
    for here, _, names in os.walk(root):  # the sandbox's uid reads it
        os.chmod(here, 0o755)
        for name in names:
            os.chmod(os.path.join(here, name), 0o644)
    try:
        main()
    finally:
        shutil.rmtree(root, ignore_errors=True)
