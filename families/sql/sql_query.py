"""SQL domains: the response is a query, run in the sandbox on the task's fixture database.

Task fields: prompt, `fixture` (SQL script: schema and rows, shown to the policy), optional
`hidden_fixtures` (same schema, other rows: a query that hard-codes the visible answer fails
there; a task without them gets perturbed copies of its fixture, sql_variants.py),
`reference_query`, optional `ordered` (row order matters; default: the reference query ends with
ORDER BY). The engine is SQLite from the sandbox's standard library; see the harness. Task SQL
is input: on this side it runs only under the guard (sqlite_guard.py), and a task whose fixture
or reference query the guard refuses is a bad task, reported with its field.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from flywheel.domains.domain import Domain, SandboxNeeds
from flywheel.domains.registry import register_domain
from flywheel.families.sql.sql_variants import derived_variants, result_key
from flywheel.families.sql.sqlite_guard import GuardedDatabase, SqlInputError

HARNESS = (Path(__file__).resolve().parent / "harnesses" / "sql.py").read_text()
GUARD = (Path(__file__).resolve().parent / "sqlite_guard.py").read_text()  # the harness imports it
REPORT_MARKER = "FLYWHEEL-SQL "  # starts the harness's report line; the verifier looks for it
_BLOCK = re.compile(r"```(?:sql|sqlite)?[ \t]*\n(.*?)```", re.S | re.I)


def query_of(response: str) -> str:
    """The query of a response: its last ```sql block, else the whole text; no trailing `;`."""
    blocks = _BLOCK.findall(response)
    return (blocks[-1] if blocks else response).strip().rstrip(";").strip()


def is_ordered(task: dict) -> bool:
    if "ordered" in task:
        return bool(task["ordered"])
    return bool(re.search(r"\border\s+by\b[^()]*$", task["reference_query"], re.I | re.S))


def fixtures_of(task: dict) -> list[str]:
    """The databases a response is run on: the visible fixture, then the hidden ones (the
    task's own, or else variants derived from the fixture). Refused SQL raises SqlInputError."""
    hidden = task.get("hidden_fixtures") or derived_variants(
        task["fixture"], task["reference_query"], is_ordered(task))
    return [task["fixture"], *hidden]


def sql_problems(task: dict) -> list[str]:
    """Why the task's SQL cannot be used, field by field: each fixture must load under the
    guard, and the reference query run on it (read-only) and read one of its tables."""
    hidden = task.get("hidden_fixtures") or []
    if not isinstance(hidden, list) or not all(isinstance(h, str) for h in hidden):
        return ["field `hidden_fixtures` must be a list of SQL scripts"]
    for field in ("fixture", "reference_query"):
        if not (isinstance(task[field], str) and task[field].strip()):
            return [f"field `{field}` must be a non-empty SQL string"]
    problems = []
    labelled = [("field `fixture`", task["fixture"])]
    labelled += [(f"field `hidden_fixtures`: item {i}", h) for i, h in enumerate(hidden, 1)]
    for label, script in labelled:
        try:
            with GuardedDatabase(script) as db:
                try:
                    result = db.query(task["reference_query"])
                except SqlInputError as e:
                    problems.append(f"field `reference_query` (on {label[6:]}): {e}")
                    continue
                if not result.tables:  # every answer, the reference's too, would earn 0
                    problems.append("field `reference_query` reads no table of the database: "
                                    "an answer must be computed from the data")
        except SqlInputError as e:
            problems.append(f"{label}: {e}")
    if not problems and not hidden:
        fixtures_of(task)  # derives the variants now (cached), while the task is being read
    return list(dict.fromkeys(problems))


class SqlDomain(Domain):
    verifier = "sql_result"
    report_marker = REPORT_MARKER
    # Headroom over the harness's own deadlines (1.2 s of queries, loads of up to four small
    # databases) for a container's start: about 1 s under docker or gVisor, more under load.
    sandbox = SandboxNeeds(language="sql (sqlite3)", files=("harness.py", "sqlite_guard.py"),
                           timeout_s=4.0)
    required_fields = ("task_id", "prompt", "fixture", "reference_query")
    max_new_tokens = 32

    def validate_task(self, task: dict) -> list[str]:
        return super().validate_task(task) or sql_problems(task)

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return f"```sql\n{task['reference_query']}\n```"

    def program(self, task: dict, response: str, marker: str = REPORT_MARKER) -> dict:
        fixtures = fixtures_of(task)
        plan = {"fixtures": fixtures, "query": query_of(response), "max_rows": 10_000,
                "budget_s": 1.2, "load_budget_s": 1.0, "marker": marker}
        return {"files": {"harness.py": HARNESS, "sqlite_guard.py": GUARD},
                "command": ["python", "harness.py"], "stdin": json.dumps(plan),
                "limits": self.sandbox.limits()}


@register_domain
class UserSql(SqlDomain):
    name = "sql"
    description = "your own SQL tasks (--tasks FILE: prompt, fixture, reference_query, ...)"

    def task_count(self) -> int | None:
        return 0


NAMES = ["Ada", "Bo", "Cyd", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo"]
CITIES = ["Oslo", "Lima", "Pune", "Kyiv"]
SCHEMA = ("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);\n"
          "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL, day TEXT);\n")


def _fixture(rng: random.Random) -> str:
    customers = [(i + 1, n, rng.choice(CITIES)) for i, n in enumerate(rng.sample(NAMES, 6))]
    amounts = rng.sample(range(5, 500), 10)  # distinct: "largest first" has no ties
    orders = [(i + 1, rng.randint(1, 5), float(a), f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}")
              for i, a in enumerate(amounts)]
    rows = [f"INSERT INTO customers VALUES ({i}, '{n}', '{c}');" for i, n, c in customers]
    rows += [f"INSERT INTO orders VALUES ({i}, {c}, {a}, '{d}');" for i, c, a, d in orders]
    return SCHEMA + "\n".join(rows)


QUESTIONS = [
    ("How many orders has each city's customers placed? Return city and count, one row per city "
     "with at least one order.",
     "SELECT c.city, COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.city"),
    ("List the names of customers who have placed no orders.",
     "SELECT name FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)"),
    ("Return the id and amount of the three largest orders, largest first.",
     "SELECT id, amount FROM orders ORDER BY amount DESC LIMIT 3"),
    ("What is the total amount ordered by each customer who ordered? Return name and total.",
     "SELECT c.name, SUM(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id"),
    ("List every customer's name with their city, sorted by name.",
     "SELECT name, city FROM customers ORDER BY name"),
    ("How many orders were placed in March 2024 (day starting with 2024-03)?",
     "SELECT COUNT(*) FROM orders WHERE day LIKE '2024-03%'"),
]


@register_domain
class ShopSql(SqlDomain):
    name = "sql_shop"
    description = "questions over a small customers/orders database (SQLite), hidden variant DB"

    def sample_task(self, rng: random.Random) -> dict:
        question, reference = rng.choice(QUESTIONS)
        fixture = _fixture(rng)
        prompt = (f"SQLite database:\n{fixture}\n\nWrite one SQL query that answers: {question}")
        return {"prompt": prompt, "fixture": fixture, "hidden_fixtures": [_hidden(fixture, reference, rng)],
                "reference_query": reference, "answer": reference}


def _answer(fixture: str, reference: str) -> tuple:
    with GuardedDatabase(fixture) as db:
        result = db.query(reference)
    return result_key(len(result.columns), result.rows, is_ordered({"reference_query": reference}))


def _hidden(fixture: str, reference: str, rng: random.Random) -> str:
    """Another draw of the database on which the question has another answer: a hidden case
    passed by the visible answer, hard-coded (a count that happens to repeat), proves nothing."""
    visible = _answer(fixture, reference)
    for _ in range(50):
        hidden = _fixture(rng)
        if _answer(hidden, reference) != visible:
            return hidden
    raise RuntimeError(f"no database with another answer to {reference!r} in 50 draws")
