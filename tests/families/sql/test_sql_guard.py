"""Task SQL that tries to reach a file (ATTACH DATABASE, VACUUM INTO) creates none on the host
through any path that runs it: the guard itself, task loading (ReadTasks), `flywheel tasks
validate`, the verifier, the Execute stage, and the sandbox harness under a backend that isolates
nothing. Each time the task is a bad-input problem naming its field, never a crash."""

import json
import os
import stat
import sqlite3
import tempfile
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

from flywheel.domains.registry import get_domain
from flywheel.families.sql.sql_query import GUARD, HARNESS, REPORT_MARKER
from flywheel.families.sql.sqlite_guard import GuardedDatabase, SqlInputError
from flywheel.domains.tool_runner import ToolRunner
from flywheel.cli import tasks as tasks_cli
from flywheel.cli.verify import attempt_of, verify_responses
from flywheel.sandbox import ExecRequest, get_backend
from flywheel.transforms.execute import execute_batch
from flywheel.transforms.tasks import ReadTasks
from flywheel.verifiers import get_verifier

SHOP = ("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount REAL);\n"
        "INSERT INTO orders VALUES (1, 10.0), (2, 25.5), (3, 7.25);\n")
REFERENCE = "SELECT id FROM orders WHERE amount > 8"


@pytest.fixture
def target(tmp_path):
    """A folder anyone may write to (the sandbox's leased uid too), and the files that hostile
    SQL would create there; the test fails if any of them exists afterwards."""
    folder = tempfile.mkdtemp(prefix="flywheel-sql-target-")
    os.chmod(folder, 0o777)
    yield folder
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)


def hostile(folder):
    """Fixture scripts that would write a file on the host if SQLite were let near one."""
    return {"attach": f"ATTACH DATABASE '{folder}/attached.db' AS x;\nCREATE TABLE x.t (a);\n" + SHOP,
            "vacuum_into": SHOP + f"VACUUM INTO '{folder}/vacuumed.db';\n",
            "attach_in_transaction": f"BEGIN;\n{SHOP}ATTACH '{folder}/late.db' AS y;\nCOMMIT;\n"}


def task(fixture, **fields):
    return {"task_id": "hostile", "domain": "sql", "prompt": "Which orders are over 8?",
            "fixture": fixture, "reference_query": REFERENCE, **fields}


def test_the_guard_refuses_files_pragmas_extensions_and_endless_sql(target):
    for name, script in hostile(target).items():
        with pytest.raises(SqlInputError, match="not authorized|too many attached"):
            GuardedDatabase(script)
    with GuardedDatabase(SHOP) as db:
        for query in [f"VACUUM INTO '{target}/q.db'", "PRAGMA writable_schema = ON",
                      "SELECT load_extension('/lib/x.so')", "DELETE FROM orders",
                      f"ATTACH '{target}/q2.db' AS z", "PRAGMA query_only = OFF"]:
            with pytest.raises(SqlInputError):
                db.query(query)
        assert db.query("SELECT count(*) FROM orders").rows == [(3,)]  # still usable after
    for script in ["PRAGMA journal_mode = WAL;", "PRAGMA temp_store_directory = '/tmp';",
                   "CREATE VIRTUAL TABLE v USING fts5(a);"]:
        with pytest.raises(SqlInputError, match="not authorized"):
            GuardedDatabase(script)
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    with pytest.raises(SqlInputError, match="took longer"):
        GuardedDatabase(f"CREATE TABLE t (x);\nINSERT INTO t {endless};", budget_s=0.2)
    with GuardedDatabase(SHOP, budget_s=0.2) as db, pytest.raises(SqlInputError, match="took longer"):
        db.query(endless)
    assert os.listdir(target) == []


def test_a_legitimate_fixture_may_create_index_view_trigger_and_transactions():
    script = ("PRAGMA foreign_keys = ON;\nBEGIN;\n" + SHOP + "CREATE INDEX by_amount ON orders (amount);\n"
              "CREATE VIEW big AS SELECT * FROM orders WHERE amount > 20;\n"
              "CREATE TABLE log (n);\nCREATE TRIGGER t AFTER INSERT ON orders BEGIN INSERT INTO log "
              "VALUES (new.id); END;\nINSERT INTO orders VALUES (4, 99);\nCOMMIT;\n"
              "SAVEPOINT s; UPDATE orders SET amount = amount + 1 WHERE id = 1; RELEASE s;")
    with GuardedDatabase(script) as db:
        result = db.query("SELECT id FROM big ORDER BY id")
        assert result.rows == [(2,), (4,)] and result.tables == ["orders"]
        assert db.query("SELECT * FROM log").rows == [(4,)]


def test_task_loading_and_tasks_validate_report_the_field(target, tmp_path, capsys):
    scripts = hostile(target)
    rows = [task(scripts["attach"], task_id="a"),
            task(SHOP, task_id="b", hidden_fixtures=[scripts["vacuum_into"]]),
            task(SHOP, task_id="c", reference_query=f"VACUUM INTO '{target}/ref.db'"),
            {"question": "Which orders are over 8?", "query": REFERENCE,       # Spider-like text
             "fixture": scripts["attach_in_transaction"]}]
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    status = tasks_cli.main(["tasks", "validate", str(path)])
    out = capsys.readouterr().out
    assert status == 1 and "0 valid tasks, 4 problems" in out
    assert f"{path}: line 1: field `fixture`: not authorized" in out
    assert f"{path}: line 2: field `hidden_fixtures`: item 1: not authorized" in out
    assert f"{path}: line 3: field `reference_query` (on `fixture`): not authorized" in out
    assert f"{path}: line 4: field `fixture`: not authorized" in out
    with BeamPipeline() as p:
        out = p | ReadTasks(patterns=[str(path)])
        assert_that(out["tasks"], equal_to([]), label="tasks")
        assert_that(out["errors"] | beam.Map(lambda e: (e["kind"], "not authorized" in e["message"])),
                    equal_to([("input", True)] * 4), label="errors")
    assert os.listdir(target) == []


def test_the_verifier_and_execute_refuse_it_as_input(target):
    bad = task(hostile(target)["attach"])
    with pytest.raises(SqlInputError):  # the verifier's own run of the reference: a ValueError
        get_verifier("sql_result")(bad, REFERENCE, None)
    with pytest.raises(SqlInputError):  # the sandbox request is never built
        get_domain("sql").request(bad, REFERENCE)
    line, = verify_responses([bad], [{"task_id": "hostile", "response": REFERENCE}])
    assert line["verdict"] == "error" and line["filter_reason"] == "input_error", line
    assert line["detail"] == "input error before verification"
    with get_backend("local") as sandbox, ThreadPoolExecutor(1) as pool:  # the pipeline's Execute
        (attempt,), (error,) = execute_batch([attempt_of(bad, REFERENCE, 0)], ToolRunner(sandbox), pool)
    assert attempt.failure == "input" and error["kind"] == "input" and error["stage"] == "execute"
    assert "not authorized" in error["message"], error
    assert os.listdir(target) == []


def harness_request(fixtures, query):
    plan = {"fixtures": fixtures, "query": query, "max_rows": 100, "budget_s": 1.0,
            "marker": REPORT_MARKER}
    return ExecRequest(files={"harness.py": HARNESS, "sqlite_guard.py": GUARD},
                       command=("python", "harness.py"), stdin=json.dumps(plan))


@pytest.mark.parametrize("backend", ["local", "unsafe-subprocess"])
def test_the_sandbox_harness_guards_fixtures_even_unisolated(target, backend):
    """The harness loads fixtures under the same guard: under a backend that isolates nothing, a
    fixture that reached it still writes no file. The control shows the sandbox's uid could."""
    with get_backend(backend) as sandbox:
        if backend == "unsafe-subprocess":
            control = sandbox.run(ExecRequest({}, ("python", "-c", "import sqlite3; sqlite3.connect("
                                                   f"':memory:').execute(\"ATTACH '{target}/control.db' AS c\")")))
            assert control.exit_code == 0 and os.listdir(target) == ["control.db"], control
            os.unlink(os.path.join(target, "control.db"))
        result = sandbox.run(harness_request([*hostile(target).values(), SHOP], REFERENCE))
    report = json.loads(result.stdout.split(REPORT_MARKER, 1)[1])
    *refused, fine = report["results"]
    assert all(r["error"].startswith("fixture: ") and r["rows"] == [] for r in refused), refused
    assert fine["error"] is None and fine["tables"] == ["orders"] and len(fine["rows"]) == 2
    assert os.listdir(target) == []


def test_a_sqlite_file_is_read_without_sqlite_opening_it(tmp_path):
    """A Spider database file (WAL mode, a view) is read as bytes into the guard: SQLite never
    opens it, so nothing beside it appears or changes (no -journal, -wal or -shm file)."""
    folder = tmp_path / "database" / "shop"
    folder.mkdir(parents=True)
    con = sqlite3.connect(folder / "shop.sqlite")
    con.executescript(SHOP + "CREATE VIEW big AS SELECT * FROM orders WHERE amount > 20;")
    con.execute("PRAGMA journal_mode = WAL")  # a WAL-mode file still reads
    con.commit()
    con.close()
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    os.chmod(folder / "shop.sqlite", stat.S_IRUSR)
    row = {"db_id": "shop", "question": "Which orders are over 8?", "query": REFERENCE}
    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps(row) + "\n")
    tasks, problems = tasks_cli.load_tasks([str(path)])
    assert problems == [] and "CREATE VIEW big" in tasks[0]["fixture"]
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before  # no -journal, -wal


def test_only_the_guard_opens_sqlite():
    """The class stays closed: no module of Flywheel but sqlite_guard.py imports sqlite3 (the
    sandbox harness imports the guard too), so no new path can run task SQL unguarded."""
    import ast
    from pathlib import Path

    import flywheel.domains
    root = Path(flywheel.domains.__file__).resolve().parent.parent  # the repository
    importers = []
    for path in sorted(p for folder in ("domains", "families", "verifiers", "pipelines", "transforms", "sandbox",
                                        "schemas", "trainer", "registry", "bench")
                       for p in (root / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "sqlite3" for n in names):
                importers.append(str(path.relative_to(root)))
    assert importers == ["families/sql/sqlite_guard.py"]
