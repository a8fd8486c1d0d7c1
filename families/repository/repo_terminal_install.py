"""repo_terminal's `install_wheel` kind: a tool imports a package vendored as source but not
installed; the task is to install it offline where the tools look (families/repository/repo_terminal.py)."""

from __future__ import annotations

import random
from typing import Any

from flywheel.families.repository.repo_terminal_kit import (SCRIPTS, SHAPES, WORDS, call, csv_text, run_check,
                                                run_test, table, task)

STATS_CORE = '''"""Summary statistics of a list of numbers."""


def summarize(values):
    values = sorted(values)
    n = len(values)
    middle = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
    return {{"count": n, "min": values[0], "max": values[-1], "median": middle, "mean": sum(values) / n}}


def render(stats, digits={digits}):
    return " ".join(f"{{k}}={{round(v, digits) if isinstance(v, float) else v}}" for k, v in stats.items())
'''

TABLE_CORE = '''"""Plain-text tables: columns padded to their widest cell."""


def render(rows, gap={gap}):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\\n".join((" " * gap).join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
'''

USES = {  # package flavour -> (the core module's template, the tool's body after the import)
    "stats": (STATS_CORE, '''

def main(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    print(render(summarize([int(r["{col}"]) for r in rows])))
'''),
    "table": (TABLE_CORE, '''

def main(path):
    with open(path, newline="") as f:
        print(render(list(csv.reader(f))))
''')}
PACKAGES = {"stats": ("statlet", "numsum", "quickstats", "tinystat", "figures"),
            "table": ("tabletext", "gridprint", "coltab", "plaintable", "cellfmt")}
TOOL_HEAD = '''"""{doc}: python3 tools/{name}.py FILE.csv (needs {pkg}: see README.md)"""
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "{target}"))  # dependencies live here, not site-packages

from {pkg} import {names}  # noqa: E402
'''


def stats_line(values: list[int], digits: int) -> str:
    """Mirror of STATS_CORE's render(summarize(values))."""
    values, n = sorted(values), len(values)
    middle = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
    stats = {"count": n, "min": values[0], "max": values[-1], "median": middle, "mean": sum(values) / n}
    return " ".join(f"{k}={round(v, digits) if isinstance(v, float) else v}" for k, v in stats.items())


def table_text(rows: list[list[str]], gap: int) -> str:
    """Mirror of TABLE_CORE's render(rows)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join((" " * gap).join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def build_install(rng: random.Random) -> dict[str, Any]:
    flavour = rng.choice(sorted(USES))
    pkg, name = rng.choice(PACKAGES[flavour]), rng.choice(SCRIPTS)
    target = rng.choice(["deps", "lib", "third_party", "_site"])
    digits, gap = rng.randint(1, 3), rng.randint(1, 3)
    key, *nums = rng.choice(SHAPES)
    col = rng.choice(nums)
    core, body = USES[flavour]
    source = f"vendor/{pkg}/src/{pkg}" if rng.random() < 0.5 else f"vendor/{pkg}/{pkg}"
    modules = {"__init__.py": f'"""{pkg}: small helpers, vendored."""\n\nfrom .core import *  # noqa: F401,F403\n',
               "core.py": core.format(digits=digits, gap=gap)}
    names = "render, summarize" if flavour == "stats" else "render"
    doc = f"Summarize column {col}" if flavour == "stats" else "Print a CSV file as a table"
    tool = TOOL_HEAD.format(doc=doc, name=name, pkg=pkg, target=target, names=names) + body.format(col=col) + \
        '\n\nif __name__ == "__main__":\n    main(sys.argv[1])\n'
    data, runs = {}, []
    for n in range(3):
        records = table(rng, key, tuple(nums), rng.randint(3, 6))
        path = f"data/{rng.choice(WORDS)}_{n}.csv"
        rows = [[key, *nums], *[[str(r[c]) for c in (key, *nums)] for r in records]]
        data[path] = csv_text(rows[0], rows[1:])
        runs.append(([f"tools/{name}.py", path], stats_line([r[col] for r in records], digits)
                     if flavour == "stats" else table_text(rows, gap)))
    version = f"0.{rng.randint(1, 9)}.{rng.randint(0, 9)}"
    files = {f"tools/{name}.py": tool, **data, **{f"{source}/{m}": t for m, t in modules.items()},
             f"vendor/{pkg}/pyproject.toml": (
                 '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
                 f'[project]\nname = "{pkg}"\nversion = "{version}"\nrequires-python = ">=3.8"\n'),
             "README.md": (f"# {name}\n\nTools for the CSV files in data/.\n\n## Setup\n\nThe tools "
                           f"import their dependencies from `{target}/` (they put it first on sys.path); "
                           f"nothing is installed system-wide. Vendored sources are in vendor/. "
                           "There is no network access.\n")}
    (argv0, out0), *others = runs
    files[f"tests/test_{name}.py"] = run_test(name, argv0, out0)
    shown = " ".join(argv0)
    prompt = (f"On a fresh checkout `python3 {shown}` fails with ModuleNotFoundError: No module "
              f"named '{pkg}'. Set the repository up so that the tools run, offline, as the README "
              "describes; do not change what they print.")
    fixed = {f"{target}/{pkg}/{m}": t for m, t in modules.items()}
    golden = [call("run_shell", command=f"python3 {shown}"), call("read_file", path="README.md"),
              call("list_files", pattern=f"vendor/{pkg}/*"),
              *[call("read_file", path=f"{source}/{m}") for m in modules],
              *[call("write_file", path=p, content=t) for p, t in fixed.items()],
              call("run_shell", command=f"python3 {shown}")]
    hidden = [run_check(" ".join(argv), argv, out) for argv, out in others]
    return task("install_wheel", pkg, prompt, files, fixed, hidden, golden)
