"""Every file a task row names stays inside its task file's folder: Spider's `db_path`, `database`
and `db_id` layout refuse absolute paths, `..` and symlinks that lead out (with real files and
links), naming file, line and field; a link that stays inside is followed; a task file on gs://
names no local file."""

import json
import os
import sqlite3

import pytest

from flywheel.families.repository.repo import snapshot_files
from flywheel.domains.task_files import task_rows
from flywheel.domains.task_paths import PathError, inside_folder
from flywheel.cli import tasks as tasks_cli

SHOP = ("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);\n"
        "INSERT INTO customers VALUES (1, 'Ada', 'Oslo'), (2, 'Bo', 'Lima'), (3, 'Cyd', 'Oslo');")
SECRET = "CREATE TABLE secret_host_table (password TEXT);\nINSERT INTO secret_host_table VALUES ('hunter2');"
QUESTION = {"question": "How many customers live in Oslo?",
            "query": "SELECT count(*) FROM customers WHERE city = 'Oslo'"}


def sqlite_file(path, script):
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.close()
    return path


@pytest.fixture
def layout(tmp_path):
    """tasks/ holds the task file and its own database; outside/ (a sibling) a database that the
    task file must not reach."""
    tasks, outside = tmp_path / "tasks", tmp_path / "outside"
    sqlite_file(tasks / "database" / "shop" / "shop.sqlite", SHOP)
    sqlite_file(outside / "host.sqlite", SECRET)
    sqlite_file(outside / "database" / "host" / "host.sqlite", SECRET)
    return tasks, outside


def load(tasks_dir, rows):
    path = tasks_dir / "dev.jsonl"
    path.write_text("".join(json.dumps({**QUESTION, "task_id": f"t{i}", **r}) + "\n"
                            for i, r in enumerate(rows)))
    tasks, problems = tasks_cli.load_tasks([str(path)])
    return str(path), tasks, problems


def test_files_inside_the_folder_are_read(layout):
    tasks_dir, _ = layout
    os.symlink("database/shop/shop.sqlite", tasks_dir / "alias.sqlite")  # a link that stays inside
    path, tasks, problems = load(tasks_dir, [{"db_id": "shop"}, {"db_path": "database/shop/shop.sqlite"},
                                             {"database": "alias.sqlite"},
                                             {"db_path": "database/../database/shop/shop.sqlite"}])
    assert problems == [] and len(tasks) == 4
    assert all("'Cyd'" in t["fixture"] for t in tasks)


def test_absolute_paths_dotdot_and_symlinks_out_are_refused(layout):
    tasks_dir, outside = layout
    os.symlink(outside / "host.sqlite", tasks_dir / "link.sqlite")             # a file link out
    os.symlink(outside / "database", tasks_dir / "linked_dir")                # a folder link out
    (tasks_dir / "database" / "evil").mkdir()
    os.symlink(outside / "host.sqlite", tasks_dir / "database" / "evil" / "evil.sqlite")
    rows = [{"db_path": str(outside / "host.sqlite")},                         # 1 absolute
            {"database": "../outside/host.sqlite"},                            # 2 .. out
            {"db_path": "link.sqlite"},                                        # 3 file symlink out
            {"db_path": "linked_dir/host/host.sqlite"},                        # 4 folder symlink out
            {"db_id": "../../../outside/database/host/host"},                  # 5 db_id climbing out
            {"db_id": "evil"},                                                 # 6 Spider layout, linked out
            {"db_path": "~/host.sqlite"},                                      # 7 home
            {"db_path": "file:///etc/hosts"}]                                  # 8 URL
    path, tasks, problems = load(tasks_dir, rows)
    assert tasks == [] and len(problems) == len(rows), problems
    fields = ["db_path", "database", "db_path", "db_path", "db_id", "db_id", "db_path", "db_path"]
    for line, (problem, field) in enumerate(zip(problems, fields), 1):
        assert problem.startswith(f"{path}: line {line}: Spider-like SQL format: field `{field}`: "), problem
        assert "secret_host_table" not in problem and "hunter2" not in problem
    assert "not relative to the task file's folder" in problems[0]
    assert all("leads out of the task file's folder" in p for p in problems[1:6])


def test_validate_names_file_line_and_field(layout, capsys):
    tasks_dir, outside = layout
    path = tasks_dir / "dev.json"  # Spider's own shape: one JSON array, numbered as items
    path.write_text(json.dumps([{**QUESTION, "db_id": "shop"}, {**QUESTION, "db_path": "../outside/host.sqlite"}]))
    status = tasks_cli.main(["tasks", "validate", str(path)])
    out = capsys.readouterr().out
    assert status == 1 and f"{path}: item 2: Spider-like SQL format: field `db_path`: " in out
    assert "secret_host_table" not in out and "1 valid tasks, 1 problems" in out


def test_a_fifo_or_folder_is_not_a_database(layout):
    tasks_dir, _ = layout
    os.mkfifo(tasks_dir / "pipe.sqlite")  # opening it for reading must not block the reader
    _, tasks, problems = load(tasks_dir, [{"db_path": "pipe.sqlite"}, {"db_path": "database"}])
    assert tasks == [] and all("field `db_path`" in p for p in problems) and len(problems) == 2


def test_a_remote_task_file_names_no_local_file(layout):
    tasks_dir, _ = layout
    data = (json.dumps({**QUESTION, "db_id": "shop"}) + "\n").encode()
    (number, row, problem, fmt), = task_rows("gs://bucket/spider/dev.jsonl", data)
    assert row is None and fmt == "spider"
    assert problem.startswith("Spider-like SQL format: field `db_id`: a task file on gs:// cannot "
                              "name a local file"), problem
    with_text = (json.dumps({**QUESTION, "fixture": SHOP}) + "\n").encode()
    (_, row, problem, _), = task_rows("gs://bucket/spider/dev.jsonl", with_text)
    assert problem is None and row["fixture"] == SHOP  # SQL text needs no file


def test_inside_folder_resolves_what_it_checked(tmp_path):
    (tmp_path / "a").mkdir()
    assert inside_folder(str(tmp_path), "a/../a/x", "f") == str(tmp_path.resolve() / "a" / "x")
    for bad in ["", "/etc/passwd", "..", "a/../../x", "x\0y"]:
        with pytest.raises(PathError, match="field `f`"):
            inside_folder(str(tmp_path), bad, "f")


def test_a_native_repo_row_is_read_from_its_task_files_folder(layout, tmp_path, monkeypatch):
    tasks_dir, outside = layout
    monkeypatch.setenv("FLYWHEEL_SNAPSHOT_STORE", str(tmp_path / "store"))
    for folder, text in [(tasks_dir / "proj", "WHERE = 'beside the task file'\n"),
                         (outside / "proj", "WHERE = 'outside'\n")]:
        (folder / "pkg").mkdir(parents=True)
        (folder / "pkg" / "__init__.py").write_text(text)
    monkeypatch.chdir(outside)  # the working directory holds a decoy of the same name
    row = {"domain": "repo", "prompt": "p", "repo": "proj",
           "hidden_tests": [{"id": "h", "module": "pkg", "call": "WHERE", "expect": "x"}]}
    path = tasks_dir / "repo.jsonl"
    path.write_text("".join(json.dumps({**row, "task_id": f"r{i}", **extra}) + "\n" for i, extra in
                            enumerate([{}, {"_folder": str(outside)}, {"repo": "../outside/proj"}])))
    tasks, problems = tasks_cli.load_tasks([str(path)])
    assert [t["task_id"] for t in tasks] == ["r0", "r1"]  # the row's own `_folder` is not heard
    assert all(snapshot_files(t)["pkg/__init__.py"] == "WHERE = 'beside the task file'\n" for t in tasks)
    assert len(problems) == 1 and problems[0].startswith(f"{path}: line 3: ")
    assert "field `repo.path`" in problems[0] and "leads out of the task file's folder" in problems[0]
