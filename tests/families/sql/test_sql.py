"""sql_result: queries run in the real sandbox on fixture databases, visible and hidden."""

import random

import pytest

from flywheel.domains.registry import get_domain

D = get_domain("sql_shop")


def task_for(question_start, index=0):
    for i in range(200):
        task = D.make_task("train", i, 0)
        if question_start in task["prompt"]:
            if index == 0:
                return task
            index -= 1
    raise LookupError(question_start)


PER_CITY = task_for("How many orders has each city")
TOP3 = task_for("Return the id and amount of the three largest")


def test_reference_queries_pass_in_any_form(score):
    assert score(PER_CITY, f"```sql\n{PER_CITY['reference_query']};\n```").verdict == "pass"
    reordered = ("select c.city as where_from, count(o.id) n from customers c join orders o "
                 "on o.customer_id = c.id group by 1 order by 2 desc")   # any row order is fine
    assert score(PER_CITY, reordered).reward == 1.0
    assert score(TOP3, TOP3["reference_query"]).verdict == "pass"


def test_wrong_queries_fail(score):
    assert score(TOP3, "SELECT id, amount FROM orders ORDER BY amount ASC LIMIT 3").verdict == "fail"
    assert score(TOP3, "SELECT id, amount FROM orders ORDER BY amount DESC LIMIT 3 OFFSET 0"
                 ).verdict == "pass"
    wrong_order = "SELECT id, amount FROM (SELECT * FROM orders ORDER BY amount DESC LIMIT 3) ORDER BY id"
    assert score(TOP3, wrong_order).reward < 1.0                    # ORDER BY matters here
    assert score(PER_CITY, "SELECT city, COUNT(*) FROM customers GROUP BY city").reward < 1.0


@pytest.mark.parametrize("response", ["", "SELEC * FROM orders", "SELECT * FROM nope",
                                      "SELECT 1; SELECT 2", "Sorry, I cannot write SQL."])
def test_malformed_queries_score_zero(score, response):
    v = score(PER_CITY, response)
    assert v.reward == 0.0 and v.verdict == "fail"


def test_hacks_score_zero(score):
    import sqlite3
    db = sqlite3.connect(":memory:")
    db.executescript(TOP3["fixture"])
    rows = db.execute(TOP3["reference_query"]).fetchall()
    literal = " UNION ALL ".join(f"SELECT {i}, {a}" for i, a in rows)  # the visible answer, hard-coded
    v = score(TOP3, f"SELECT * FROM ({literal}) ORDER BY 2 DESC")
    assert v.reward == 0.0 and v.exploit_suspected and v.components["visible_0"] == 1.0
    for query in ["DELETE FROM orders", "DROP TABLE orders",
                  "ATTACH DATABASE 'result.db' AS r", "PRAGMA query_only = OFF",
                  "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n",
                  "SELECT 'PASS', 'ok'"]:
        assert score(TOP3, query).reward == 0.0, query


def test_generated_sql_tasks_pass_with_their_demonstration(score):
    rng = random.Random(0)
    for i in range(12):
        task = D.make_task("train", i, 0)
        assert score(task, D.demonstration(task, rng)).verdict == "pass", task["prompt"][-80:]


def test_an_empty_reference_result_still_needs_its_columns(score):
    """On a fixture where the right answer has no rows, a query returning nothing of another
    shape is wrong: the column count is checked apart from the rows."""
    emptied = {**TOP3, "hidden_fixtures": [TOP3["fixture"] + "\nDELETE FROM orders;"]}
    assert score(emptied, "SELECT 1 WHERE 0").components["hidden_0"] == 0.0
    assert score(emptied, "SELECT id FROM orders WHERE 0").components["hidden_0"] == 0.0


def test_returning_nothing_earns_nothing(score):
    """A fixture whose right answer is empty is passed only by a query that also gets the rows
    right where there are some: `WHERE 0` of the right shape earns 0, the reference 1."""
    emptied = {**TOP3, "hidden_fixtures": [TOP3["fixture"] + "\nDELETE FROM orders;"]}
    nothing = score(emptied, "SELECT id, amount FROM orders WHERE 0")
    assert nothing.reward == 0.0 and nothing.components["hidden_0"] == 0.0, nothing
    assert score(emptied, TOP3["reference_query"]).reward == 1.0


def test_a_task_with_no_rows_to_return_anywhere_cannot_be_scored(score):
    task = {**TOP3, "reference_query": "SELECT id, amount FROM orders WHERE amount < 0",
            "hidden_fixtures": []}
    with pytest.raises(ValueError, match="no rows on any fixture"):
        score(task, "SELECT id, amount FROM orders WHERE 0")
