"""The pieces every repo_terminal kind builds its tasks from (families/repository/repo_terminal.py): names
and data shapes, CSV text, run checks and visible tests, the task record, planted defects."""

from __future__ import annotations

import random
from typing import Any

KINDS = ("repair_script", "install_wheel", "transform_files")
WORDS = ("alder", "birch", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "iris", "juniper",
         "kestrel", "lumen", "maple", "nectar", "onyx", "pebble", "quartz", "raven", "sierra", "tundra")
PEOPLE = ("ada", "bo", "cy", "dee", "eli", "fay", "gus", "hal", "ivy", "jo", "kai", "lu", "max", "ned")
SCRIPTS = ("tally", "report", "totals", "ledger", "stock", "scores", "digest", "rollup", "audit")
SHAPES = (  # (the key column, two numeric columns)
    ("customer", "qty", "price"), ("region", "units", "revenue"), ("employee", "hours", "overtime"),
    ("warehouse", "stock", "reorder"), ("team", "points", "fouls"), ("station", "rain", "wind"))


def csv_text(header: list[str], rows: list[list]) -> str:
    return "".join(",".join(map(str, r)) + "\n" for r in [header, *rows])


def argv_text(argv: list[str]) -> str:
    return ", ".join(repr(a) for a in argv)


def run_check(cid: str, argv: list[str], expect: str) -> dict[str, Any]:
    """A check running `python3 ARGV...` in the repository; its stripped stdout must be `expect`."""
    return {"id": cid, "module": "subprocess", "expect": expect,
            "call": f"run([sys.executable, {argv_text(argv)}], capture_output=True, text=True, "
                    "timeout=5).stdout.strip()"}


def run_test(name: str, argv: list[str], expect: str) -> str:
    """A visible test file: run the command, compare its stripped stdout."""
    return ("import subprocess\nimport sys\n\n\n"
            f"def test_{name}():\n"
            f"    done = subprocess.run([sys.executable, {argv_text(argv)}], capture_output=True, "
            "text=True, timeout=5)\n"
            f"    assert done.stdout.strip() == {expect!r}, done.stderr[-800:]\n")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def task(kind: str, package: str, prompt: str, files: dict[str, str], fixed: dict[str, str],
         hidden: list[dict], golden: list[dict]) -> dict[str, Any]:
    visible = sorted(p for p in files if p.startswith("tests/"))
    return {"prompt": prompt, "repo": {"files": dict(sorted(files.items()))}, "fixed_files": fixed,
            "visible_tests": visible, "hidden_tests": hidden, "regression_tests": [],
            "golden": [*golden, call("run_visible_tests"), call("submit_changes")], "kind": kind, "package": package}


def plant(fixed: str, good: str, bad: str) -> str:
    if fixed.count(good) != 1:
        raise ValueError(f"snippet does not occur exactly once: {good!r}")
    return fixed.replace(good, bad)


def table(rng: random.Random, key: str, nums: tuple[str, ...], n: int) -> list[dict]:
    """`n` records with distinct `key` words and numbers in [1, 99] for each of `nums`."""
    return [{key: k, **{c: rng.randint(1, 99) for c in nums}} for k in rng.sample(WORDS, n)]
