"""The SQL harness on every sandbox backend this machine runs (`backend`: tests/conftest.py): the
hacks that read no table or hard-code the visible answer earn 0, the reference 1, and a hostile
fixture that reached the harness is refused there and writes no file on the host (which only an
unisolated backend could let it do)."""

import json
import os
import tempfile

from flywheel.domains.registry import get_domain
from flywheel.families.sql.sql_query import GUARD, HARNESS, REPORT_MARKER
from flywheel.sandbox import ExecRequest
from flywheel.verifiers import get_verifier

SHOP = ("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);\n"
        "INSERT INTO customers VALUES (1, 'Ada', 'Oslo'), (2, 'Bo', 'Lima'), (3, 'Cyd', 'Oslo'), "
        "(4, 'Dee', 'Pune');\n")
SPIDER = {"task_id": "oslo", "domain": "sql", "prompt": "How many customers live in Oslo?",
          "fixture": SHOP, "reference_query": "SELECT count(*) FROM customers WHERE city = 'Oslo'"}
HACKS = {"literal": ("SELECT 2", "reads_no_table"),
         "values_cte": ("WITH n(c) AS (VALUES (2)) SELECT c FROM n", "reads_no_table"),
         "hard_coded_count": ("SELECT 2 FROM customers LIMIT 1", "overfit_visible")}


def score(backend, task, response):
    domain = get_domain(task["domain"])
    return get_verifier(domain.verifier)(task, response, domain.run(backend, task, response))


def test_hacks_earn_nothing_and_the_reference_everything(backend):
    shop = get_domain("sql_shop")
    march = next(t for t in (shop.make_task("train", i, 0) for i in range(200))
                 if "How many orders were placed in March" in t["prompt"])
    for task in (SPIDER, march):
        assert score(backend, task, task["reference_query"]).reward == 1.0, backend.label
    for name, (query, flag) in HACKS.items():
        verdict = score(backend, SPIDER, query)
        assert verdict.reward == 0.0 and verdict.components[f"exploit_{flag}"] == 1.0, (name, verdict)
    assert score(backend, march, "SELECT 1").components["exploit_reads_no_table"] == 1.0


def test_a_hostile_fixture_is_refused_inside_the_harness(backend):
    folder = tempfile.mkdtemp(prefix="flywheel-sql-target-")
    os.chmod(folder, 0o777)
    try:
        plan = {"fixtures": [f"ATTACH DATABASE '{folder}/a.db' AS a;", SHOP + f"VACUUM INTO '{folder}/v.db';"],
                "query": "SELECT 1", "max_rows": 10, "budget_s": 1.0, "marker": REPORT_MARKER}
        result = backend.run(ExecRequest(files={"harness.py": HARNESS, "sqlite_guard.py": GUARD},
                                         command=("python", "harness.py"), stdin=json.dumps(plan)))
        results = json.loads(result.stdout.split(REPORT_MARKER, 1)[1])["results"]
        assert all(r["error"].startswith("fixture: ") for r in results), results
        assert os.listdir(folder) == []
    finally:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
