"""What scoring a pytest-graded repository answer costs: the trusted run (the whole test tree put
back as the snapshot has it, pytest under its own configuration, outcomes through the signed
recorder) beside plain pytest on the same fixed tree (no sandbox, no protection: the baseline).

    python bench/repo_scoring.py [--tests 40] [--modules 20] [--repeats 9] [--seed 0]

A generated package of --modules modules and a test module of --tests tests (one FAIL_TO_PASS,
the rest parametrized twice: PASS_TO_PASS ids), scored with the reference patch through the `repo` domain on the local
sandbox (warm pool) and its verifier; the baseline copies the fixed tree to a temp dir and runs
`python -m pytest NODEIDS` there. Median and p95 ms of --repeats runs each, and their ratio.
Written against the domain's public API only, so the same file runs on the code before and
after a change (run it with each checkout's interpreter, one after the other).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "families"))
from conftest import copy_packages  # noqa: E402  pytest laid out as `flywheel env build` lays it


def make_diff(before: dict, after: dict) -> str:
    for module in ("flywheel.families.repository.unified_diff", "flywheel.domains.unified_diff"):
        try:  # where it lives now, and where it lived before the task families had packages
            return importlib.import_module(module).make_diff(before, after)
        except ModuleNotFoundError:
            continue
    raise ImportError("no unified_diff module")


def environment(root: Path) -> None:
    """pytest and what it needs, laid out as `pip install --target` does, readable by the sandbox."""
    copy_packages(root / "pytest-env")
    for here, _, files in os.walk(root):
        os.chmod(here, 0o755)
        for name in files:
            os.chmod(os.path.join(here, name), 0o644)


def package(modules: int, tests: int, rng: random.Random) -> tuple[dict, dict, str, list[str]]:
    """(snapshot files, fixed files, test module text, node ids): `calc.ops.total` subtracts."""
    files = {"calc/__init__.py": "", "calc/ops.py": "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"}
    for i in range(modules):
        files[f"calc/m{i:03d}.py"] = "".join(f"def f{j}(x):\n    return x * {rng.randint(2, 9)} + {j}\n\n\n" for j in range(20))
    files["tests/__init__.py"] = ""
    files["tests/helpers.py"] = "def cases():\n    return [(1, 2), (3, 4)]\n"
    body = ["import pytest\nfrom calc.ops import total\nfrom tests.helpers import cases\n\n\n",
            "def test_total():\n    assert total([4, 5]) == 9\n\n\n"]
    for i in range(tests - 1):
        m = i % max(modules, 1)
        body.append(f"@pytest.mark.parametrize('a,b', cases())\ndef test_p{i}(a, b):\n"
                    f"    from calc import m{m:03d}\n    assert m{m:03d}.f0(a) == m{m:03d}.f0(a)\n\n\n")
    fixed = {**files, "calc/ops.py": files["calc/ops.py"].replace("-=", "+=")}
    nodes = ["tests/test_calc.py::test_total"] + [f"tests/test_calc.py::test_p{i}[{a}-{b}]"
                                                   for i in range(tests - 1) for a, b in ((1, 2), (3, 4))]
    return files, fixed, "".join(body), nodes


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tests", type=int, default=40)
    p.add_argument("--modules", type=int, default=20)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-repo-scoring-", dir="/tmp"))
    environment(root)
    os.environ["FLYWHEEL_ENVIRONMENTS"] = str(root)
    from flywheel.domains.registry import get_domain
    from flywheel.sandbox import get_backend
    from flywheel.verifiers import get_verifier

    files, fixed, tests, nodes = package(args.modules, args.tests, random.Random(args.seed))
    row = {"task_id": "calc-bench", "domain": "repo", "prompt": "total() subtracts.",
           "repo": {"files": files}, "environment": "pytest-env",
           "test_patch": make_diff({}, {"tests/test_calc.py": tests}),
           "reference_patch": make_diff(files, fixed),
           "hidden_tests": [{"id": nodes[0], "pytest": nodes[0]}],
           "regression_tests": [{"id": n, "pytest": n} for n in nodes[1:]],
           "limits": {"timeout_s": 60}}
    domain = get_domain("repo")
    task = domain.normalize_task(dict(row))
    problems = domain.validate_task(task)
    assert not problems, problems
    backend = get_backend("local")
    verifier = get_verifier(domain.verifier)

    def score():
        verdict = verifier(task, task["reference_patch"], domain.run(backend, task, task["reference_patch"]))
        assert verdict.reward == 1.0, verdict.detail

    plain_dir = root / "plain"

    def plain():
        shutil.rmtree(plain_dir, ignore_errors=True)
        for rel, text in {**fixed, "tests/test_calc.py": tests}.items():
            (plain_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (plain_dir / rel).write_text(text)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *nodes],
                              cwd=plain_dir, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:]

    score(), plain()  # warm: the pool's first server, the interpreter's caches
    ours, base = [], []
    for _ in range(args.repeats):  # alternating, so a noisy moment costs both alike
        ours += timed(score, 1)
        base += timed(plain, 1)
    backend.close()
    shutil.rmtree(root, ignore_errors=True)

    def fig(xs):
        return f"{statistics.median(xs):.0f} / {sorted(xs)[int(0.95 * (len(xs) - 1))]:.0f}"
    print(f"scoring a repository answer: {args.modules} modules, {args.tests} tests "
          f"({len(nodes) - 1} PASS_TO_PASS ids), {args.repeats} runs each, ms median / p95")
    print(f"  trusted run (local sandbox, verifier): {fig(ours)}")
    print(f"  plain pytest (subprocess, no sandbox): {fig(base)}")
    print(f"  ratio (median): {statistics.median(ours) / statistics.median(base):.2f}x")


if __name__ == "__main__":
    main()
