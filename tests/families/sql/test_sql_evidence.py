"""A SQL answer must be computed from the database: in the real sandbox, a query that reads no
table (`SELECT 2`, VALUES, literal rows, a CTE of literals) earns 0 with the flag
`reads_no_table`, and one that reads a table but hard-codes the visible answer (`SELECT 2 FROM
customers LIMIT 1`) fails the hidden variants: the task's own (sql_shop) or, for a task that
gives none (a Spider row), perturbed copies of its fixture. The reference query, and queries
equivalent to it, still earn 1."""

import json
import sqlite3

import pytest

from flywheel.domains.registry import get_domain
from flywheel.families.sql.sql_query import fixtures_of
from flywheel.families.sql.sql_variants import derived_variants, result_key
from flywheel.families.sql.sqlite_guard import GuardedDatabase
from flywheel.cli import tasks as tasks_cli

SHOP = ("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);\n"
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers (id), "
        "amount REAL, items INTEGER);\n"
        "INSERT INTO customers VALUES (1, 'Ada', 'Oslo'), (2, 'Bo', 'Lima'), (3, 'Cyd', 'Oslo'), "
        "(4, 'Dee', 'Pune'), (5, 'Eli', 'Oslo');\n"
        "INSERT INTO orders VALUES (1, 1, 12.5, 2), (2, 1, 40.0, 1), (3, 2, 7.25, 5), (4, 3, 99.0, 3), "
        "(5, 5, 15.0, 4), (6, 4, 61.5, 2);\n")
SPIDER_ROWS = [
    {"task_id": "oslo", "question": "How many customers live in Oslo?",
     "query": "SELECT count(*) FROM customers WHERE city = 'Oslo'"},
    {"task_id": "names", "question": "Names of the customers in Oslo.",
     "query": "SELECT name FROM customers WHERE city = 'Oslo'"},
    {"task_id": "big", "question": "Ids and amounts of the two largest orders, largest first.",
     "query": "SELECT id, amount FROM orders ORDER BY amount DESC LIMIT 2"},
]


@pytest.fixture(scope="module")
def spider(tmp_path_factory):
    """The Spider rows, read from a real dev.jsonl with Spider's database layout beside it: no
    row gives hidden fixtures."""
    root = tmp_path_factory.mktemp("spider")
    (root / "database" / "shop").mkdir(parents=True)
    con = sqlite3.connect(root / "database" / "shop" / "shop.sqlite")
    con.executescript(SHOP)
    con.commit()
    con.close()
    (root / "dev.jsonl").write_text("".join(json.dumps({**r, "db_id": "shop"}) + "\n" for r in SPIDER_ROWS))
    tasks, problems = tasks_cli.load_tasks([str(root / "dev.jsonl")])
    assert problems == [] and all("hidden_fixtures" not in t for t in tasks)
    return {t["task_id"]: t for t in tasks}


def visible_answer(task):
    with GuardedDatabase(task["fixture"]) as db:
        return db.query(task["reference_query"]).rows


def literal_hacks(task):
    """Queries that return the visible answer without reading any table."""
    rows = visible_answer(task)
    cells = [", ".join(repr(v) for v in row) for row in rows]
    union = " UNION ALL ".join(f"SELECT {c}" for c in cells)
    values = ", ".join(f"({c})" for c in cells)
    width = len(rows[0])
    columns = ", ".join(f"c{i}" for i in range(width))
    return {"union": union, "values": f"VALUES {values}",
            "cte": f"WITH answer({columns}) AS (VALUES {values}) SELECT * FROM answer",
            "subquery": f"SELECT * FROM ({union})"}


def assert_no_reward(verdict, flag):
    assert verdict.reward == 0.0 and verdict.verdict == "fail", verdict
    assert verdict.exploit_suspected and verdict.components[f"exploit_{flag}"] == 1.0, verdict


def shop_task(start):
    domain = get_domain("sql_shop")
    return next(t for t in (domain.make_task("train", i, 0) for i in range(200)) if start in t["prompt"])


@pytest.mark.parametrize("question", ["How many orders were placed in March", "How many orders has each city",
                                      "Return the id and amount of the three largest"])
def test_sql_shop_hacks_earn_nothing(score, question):
    task = shop_task(question)
    assert score(task, task["reference_query"]).reward == 1.0
    for name, hack in literal_hacks(task).items():
        assert_no_reward(score(task, hack), "reads_no_table")
    assert_no_reward(score(task, "SELECT 2"), "reads_no_table")
    first = visible_answer(task)[0]
    hard_coded = f"SELECT {', '.join(map(repr, first))} FROM orders LIMIT 1"  # touches a table
    verdict = score(task, hard_coded)
    assert verdict.reward == 0.0 and verdict.components["hidden_0"] == 0.0, verdict


def test_spider_rows_without_hidden_fixtures_get_variants_and_hacks_earn_nothing(score, spider):
    for task in spider.values():
        assert len(fixtures_of(task)) > 1, task["task_id"]
        assert score(task, task["reference_query"]).reward == 1.0, task["task_id"]
        for name, hack in literal_hacks(task).items():
            assert_no_reward(score(task, hack), "reads_no_table")
    assert_no_reward(score(spider["oslo"], "SELECT 3"), "reads_no_table")
    # Reads a table, hard-codes the visible count: right on the visible fixture only.
    verdict = score(spider["oslo"], "SELECT 3 FROM customers LIMIT 1")
    assert verdict.components["visible_0"] == 1.0 and verdict.reward == 0.0, verdict
    assert verdict.exploit_suspected and verdict.components["exploit_overfit_visible"] == 1.0
    names = score(spider["names"], "SELECT name FROM customers WHERE id IN (1, 3, 5)")
    assert names.components["visible_0"] == 1.0 and names.reward < 1.0, names


def test_equivalent_queries_still_pass_on_the_variants(score, spider):
    assert score(spider["oslo"], "SELECT COUNT(id) FROM customers WHERE city IN ('Oslo')").reward == 1.0
    assert score(spider["oslo"], "SELECT count(*) FROM (SELECT * FROM customers WHERE city = 'Oslo')"
                 ).reward == 1.0
    assert score(spider["names"], "select c.name from customers c where c.city like 'oslo' "
                                  "order by c.name desc").reward == 1.0
    assert score(spider["big"], "SELECT id, amount FROM orders WHERE amount >= "
                                "(SELECT amount FROM orders ORDER BY amount DESC LIMIT 1 OFFSET 1) "
                                "ORDER BY amount DESC").reward == 1.0


def test_a_count_star_reads_its_table():
    """SQLite reports `SELECT count(*) FROM t` as a read of t with an empty column; a view of
    literals, SQLite's own tables and a CTE are not tables of the database."""
    with GuardedDatabase(SHOP + "CREATE VIEW constant AS SELECT 3 AS n;\n"
                                "CREATE VIEW oslo AS SELECT * FROM customers WHERE city = 'Oslo';") as db:
        assert db.query("SELECT count(*) FROM customers").tables == ["customers"]
        assert db.query("SELECT 1 FROM orders LIMIT 1").tables == ["orders"]
        assert db.query("SELECT count(*) FROM oslo").tables == ["customers"]
        for query in ["SELECT 2", "VALUES (1)", "SELECT n FROM constant", "SELECT count(*) FROM sqlite_master",
                      "WITH customers(x) AS (VALUES (3)) SELECT x FROM customers"]:
            assert db.query(query).tables == [], query


def test_variants_are_deterministic_differ_from_the_visible_answer_and_keep_answers():
    for row in SPIDER_ROWS:
        ordered = "ORDER BY" in row["query"]
        variants = derived_variants.__wrapped__(SHOP, row["query"], ordered)
        assert variants == derived_variants.__wrapped__(SHOP, row["query"], ordered)  # same seed
        with GuardedDatabase(SHOP) as db:
            shown = db.query(row["query"])
        answers = []
        for script in variants:
            with GuardedDatabase(script) as db:
                result = db.query(row["query"])
                assert set(db.table_names()) == {"customers", "orders"}
            assert result_key(len(result.columns), result.rows, ordered) != \
                result_key(len(shown.columns), shown.rows, ordered)
            answers.append(result.rows)
        assert 1 <= len(variants) <= 3 and any(answers), row["query"]
    # A task's own hidden fixtures are used as given; an answer that no data changes gets none.
    assert fixtures_of({"fixture": SHOP, "reference_query": "SELECT 1", "hidden_fixtures": ["x"]}) == [SHOP, "x"]
    assert derived_variants(SHOP, "SELECT count(*) FROM customers WHERE 0", False) == ()


def test_a_task_whose_reference_reads_no_table_is_refused(tmp_path, capsys):
    """Its every answer would earn 0: the task is a bad-input problem, field named, at load."""
    path = tmp_path / "constant.jsonl"
    path.write_text(json.dumps({"question": "What is two?", "query": "SELECT 2", "fixture": SHOP,
                                "hidden_fixtures": [SHOP]}) + "\n")
    assert tasks_cli.main(["tasks", "validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.count(f"{path}: line 1: field `reference_query` reads no table of the database") == 1, out


EQUIVALENT = [  # (reference, a query with the same answer wherever every reference resolves)
    ("SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id "
     "ORDER BY count(*) DESC LIMIT 1",
     "SELECT name FROM customers WHERE id = (SELECT customer_id FROM orders GROUP BY customer_id "
     "ORDER BY count(*) DESC, customer_id DESC LIMIT 1)"),
    ("SELECT c.city FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.city "
     "ORDER BY sum(o.amount) DESC LIMIT 1",
     "SELECT city FROM (SELECT k.city, sum(amount) s FROM orders JOIN customers k ON k.id = customer_id "
     "GROUP BY k.city) ORDER BY s DESC, city DESC LIMIT 1"),
    ("SELECT name FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)",
     "SELECT c.name FROM customers c LEFT JOIN orders o ON o.customer_id = c.id WHERE o.id IS NULL"),
    ("SELECT sum(o.items) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.city = 'Oslo'",
     "SELECT sum(items) FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE city = 'Oslo')"),
]


def test_variants_keep_every_reference_and_no_answer_hangs_on_a_tie():
    """Dropped rows are never parents (no orphan order), copies get fresh keys, and a variant on
    which the reference's ORDER BY ties (two right answers) is not kept: queries equivalent to
    the reference wherever references resolve agree with it on every variant."""
    from flywheel.families.sql.sql_variants import _depends_on_ties
    for reference, equivalent in EQUIVALENT:
        variants = derived_variants.__wrapped__(SHOP, reference, False)
        assert variants, reference
        for script in variants:
            with GuardedDatabase(script) as db:
                orphans = db.query("SELECT count(*) FROM orders WHERE customer_id NOT IN "
                                   "(SELECT id FROM customers)").rows
                assert orphans == [(0,)]
                assert db.query("SELECT count(*) - count(DISTINCT id) FROM customers").rows == [(0,)]
                want, got = db.query(reference), db.query(equivalent)
                assert not _depends_on_ties(db, reference, want, False)
            assert result_key(1, want.rows, False) == result_key(1, got.rows, False), (reference, script)
