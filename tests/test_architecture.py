"""The import rules of docs/ARCHITECTURE.md hold: every import of every module is checked (ast)
against the folder table there, which is read from the document itself."""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = "docs/ARCHITECTURE.md"
ROW = re.compile(r"^\| `(\w+)/` \|[^|]*\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|$")
THIRD_PARTY_RULES = {"standard library only": set(), "pyarrow only": {"pyarrow"}}


def rules(root: Path) -> dict[str, tuple[set[str], str]]:
    """folder -> (Flywheel folders it may import, the rule of its `also` column)."""
    table = {}
    for line in (root / DOC).read_text().splitlines():
        m = ROW.match(line.strip())
        if m:
            allowed = {a.strip() for a in m.group(2).split(",")} - {"nothing"}
            table[m.group(1)] = (allowed, m.group(3).strip())
    return table


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, nested ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def violations(root: Path) -> list[str]:
    """Every import that breaks the table, as `path:line: what`."""
    table, found = rules(root), []
    for folder, (allowed, also) in table.items():
        for path in sorted((root / folder).rglob("*.py")):
            where = path.relative_to(root)
            mods = imports(path)
            for line, module in mods:
                top, _, rest = module.partition(".")
                if top == "flywheel":
                    target = rest.split(".")[0]
                    if target != folder and target not in allowed:
                        found.append(f"{where}:{line}: imports {module} ({folder}/ may import "
                                     f"{', '.join(sorted(allowed)) or 'nothing of Flywheel'})")
                elif also in THIRD_PARTY_RULES and top not in sys.stdlib_module_names \
                        and top not in THIRD_PARTY_RULES[also]:
                    found.append(f"{where}:{line}: imports {module} ({folder}/: {also})")
                elif also == "no Beam" and top == "apache_beam":
                    found.append(f"{where}:{line}: imports {module} ({folder}/: {also})")
            if also == "every module imports Beam" and path.name != "__init__.py" \
                    and not any(m.split(".")[0] == "apache_beam" for _, m in mods):
                found.append(f"{where}: no Beam import ({folder}/ holds Beam code only)")
    return found


def test_the_table_names_every_folder_of_the_package():
    table = rules(ROOT)
    assert set(table) == {"registry", "schemas", "sandbox", "domains", "families", "records", "verifiers", "trainer", "cli", "reports",
                          "transforms", "pipelines", "steering", "web", "loop", "feedback", "policy", "settings"}
    packaged = re.findall(r'"flywheel\.(\w+)" = "(\w+)"', (ROOT / "pyproject.toml").read_text())
    assert {folder for _, folder in packaged} == set(table)


def test_every_import_follows_the_rules():
    assert violations(ROOT) == []


def test_a_planted_import_is_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / DOC, tmp_path / DOC)
    for folder in rules(ROOT):
        (tmp_path / folder).mkdir()
    (tmp_path / "trainer" / "leak.py").write_text(
        "import torch\nimport apache_beam as beam\n\n\ndef f():\n    from flywheel.cli import main\n")
    (tmp_path / "sandbox" / "leak.py").write_text("from flywheel.domains.registry import get_domain\n")
    (tmp_path / "schemas" / "leak.py").write_text("import pyarrow\nimport numpy\n")
    (tmp_path / "verifiers" / "leak.py").write_text("from flywheel.families.regex.matcher import compile_regex\n")
    (tmp_path / "transforms" / "plain.py").write_text("import json\n")
    assert sorted(violations(tmp_path)) == [
        "sandbox/leak.py:1: imports flywheel.domains.registry (sandbox/ may import registry, web)",
        "schemas/leak.py:2: imports numpy (schemas/: pyarrow only)",
        "trainer/leak.py:2: imports apache_beam (trainer/: no Beam)",
        "trainer/leak.py:6: imports flywheel.cli (trainer/ may import policy, registry, schemas)",
        "transforms/plain.py: no Beam import (transforms/ holds Beam code only)",
        "verifiers/leak.py:1: imports flywheel.families.regex.matcher (verifiers/ may import domains, "
        "registry, sandbox, schemas)",
    ]


def test_the_attempt_record_needs_no_beam():
    """The central record is built and read without Beam (a script, another runner, a test)."""
    code = ("import sys; from flywheel.records.attempt import Attempt; "
            "a = Attempt('r', 0, 0, 'train', 'add', 't', 'g', 0, 'p', {}, 1.0, 8, 1); "
            "assert a.replace(response='x').row()['response'] == 'x'; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'apache_beam'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out
