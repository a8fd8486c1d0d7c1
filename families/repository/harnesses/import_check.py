"""Whether the repository's own package imports in this sandbox at the snapshot, before any answer
is applied (the `score` mode asks, repo_checks.py): when it does not (a dependency the task's
environment lacks, a layout nothing put on sys.path), no answer can pass, so the scorer reports an
environment error with the import's own message instead of failing every check on the model.

The package's top-level names come from the install folder (families/repository/repo_install.py,
mounted read-only at harness SITE); a repository that declares no package is not probed. The probe
is one child of the sandbox's Python, with the same sys.path the checks get. Standard library only.
"""

import json
import os
import sys

h = sys.modules["harness"]


def declared_packages():
    """The top-level names the repository's packaging declares, [] when it declares none."""
    path = os.path.join(h.SITE, "install.json")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        names = json.load(f).get("top_level") or []
    return [n for n in names if isinstance(n, str) and n.isidentifier()]


def import_problem(budget_s):
    """Why the declared packages do not import in the pristine tree (the error's last line, with
    the package's name), or None when they do or none is declared."""
    names = declared_packages()
    if not names:
        return None
    code = ("import importlib, sys\n"
            f"sys.path[:0] = {json.dumps(h.env_paths() + [h.REPO])}\n"
            f"for name in {json.dumps(names)}:\n"
            "    print('importing', name, flush=True)\n"
            "    importlib.import_module(name)\n")
    status, out = h.run_logged([sys.executable, "-I", "-B", "-c", code], max(1.0, budget_s), 3000)
    if status == 0:
        return None
    lines = [line for line in out.strip().splitlines() if line.strip()]
    name = next((line.split(" ", 1)[1] for line in reversed(lines) if line.startswith("importing ")), names[0])
    if status is None:
        return f"importing the repository's package {name!r} does not finish in {budget_s:.0f} s"
    return (f"the repository's package {name!r} does not import in the task's environment: "
            f"{lines[-1] if lines else f'exit {status}'}")[:600]
