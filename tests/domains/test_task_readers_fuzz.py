"""Every reader of a task file is total (issue 37, class 6): a row of any shape becomes a task or
problems naming its file, line and field, and the rows after it are still read, in order.

The rows start valid, one per published format (HumanEval, MBPP, GSM8K, MATH, Spider-like SQL,
SWE-bench) and per kind of domain a user's file reaches (python_tests, math, sql, documents,
shell, fix_function, render, repository); hypothesis puts a wrong value (null, numbers huge and
not finite, booleans, strings, lists, objects, nesting past any limit) at one field or sub-field.
The bytes of a file are tried too: not UTF-8, a BOM, CRLF, a line cut short, U+2028 or U+0085 in a string.
No sandbox runs: reading a row never runs anything.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from flywheel.cli import tasks as tasks_cli
from flywheel.domains.registry import get_domain
from flywheel.domains.task_files import MAX_DEPTH, task_rows

from tests.domains.test_task_formats import GSM8K, HUMANEVAL, MATH, MBPP, SHOP, SPIDER

SWEBENCH = {"instance_id": "demo__demo-1", "problem_statement": "Fix add.", "repo": "demo/demo",
            "base_commit": "abc", "patch": "", "test_patch": "",
            "FAIL_TO_PASS": ["tests/test_add.py::test_add"], "PASS_TO_PASS": []}


def generated(name: str, **more) -> dict:
    """A valid row of domain `name`, as its own generator writes one."""
    return {**get_domain(name).make_task("train", 0, 0), **more, "domain": name}


def seeds() -> dict[str, dict]:
    return {
        "humaneval": HUMANEVAL, "mbpp": MBPP, "gsm8k": GSM8K, "math": MATH,
        "spider": {**SPIDER, "fixture": SHOP},
        "python_tests": generated("py_functions", timeout_s=2.0, test_imports=[]),
        "mbpp_rows": generated("py_mbpp", case_timeout_s=1.0, test_setup_code=""),
        "math_rows": generated("math_linear"),
        "sql_rows": generated("sql_shop", hidden_fixtures=[]),
        "documents": generated("doc_fields"),
        "shell": generated("shell_files", exact=True),
        "fix_function": generated("fix_function"),
        "render": generated("chart_to_code", bounds=2, route="matplotlib"),
        "repo": generated("repo_bugs", limits={"timeout_s": 30}, visible_tests=[]),
    }


SEEDS = seeds()


def paths(value, prefix=()) -> list[tuple]:
    """Every field and sub-field of a row (a dict key or a list index), outermost first."""
    found = []
    items = value.items() if isinstance(value, dict) else enumerate(value[:2]) if isinstance(value, list) else []
    for key, inner in items:
        found.append(prefix + (key,))
        if len(prefix) < 2:
            found += paths(inner, prefix + (key,))
    return found


def replaced(row, path, value):
    """`row` with the value at `path` replaced by `value` (a copy; None in `path` deletes)."""
    row = json.loads(json.dumps(row))
    *parents, last = path
    inner = row
    for key in parents:
        inner = inner[key]
    inner[last] = value
    return row


def deep(n: int):
    value = "bottom"
    for _ in range(n):
        value = [value]
    return value


WRONG = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from([2**63, -2**70, 10**300]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.sampled_from(["", " ", "x" * 100_000, "\u2028", "\x00", "def f(:", "1" * 5000]),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=3),
    st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=3),
    st.sampled_from([deep(MAX_DEPTH + 5), deep(30), {"a": {"b": {"c": None}}}]))


def read(tmp_path, name: str, lines: list[bytes]):
    """(tasks, problems) of a task file holding `lines`, read as `flywheel tasks validate` reads
    it (the pipeline's ReadTasks reads the same rows through the same two functions)."""
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return tasks_cli.load_tasks([str(path)]), str(path)


@settings(max_examples=60, deadline=5000, suppress_health_check=list(HealthCheck))
@given(data=st.data(), wrong=WRONG)
def test_a_wrong_value_at_any_field_is_that_rows_problem_and_the_rows_after_it_are_read(tmp_path_factory, data, wrong):
    name = data.draw(st.sampled_from(sorted(set(SEEDS) - {"repo"})), label="seed")
    row = SEEDS[name]
    path = data.draw(st.sampled_from(paths(row)), label="field")
    bad = replaced(row, path, wrong)
    good = [dict(row, task_id=f"good-{i}") for i in (1, 2)]
    lines = [json.dumps(good[0]).encode(), json.dumps(bad, allow_nan=True).encode(), json.dumps(good[1]).encode()]
    (tasks, problems), file = read(tmp_path_factory.mktemp("rows"), name, lines)
    assert [t["task_id"] for t in tasks if t["source"] != f"{file}: line 2"] == ["good-1", "good-2"]
    assert all(p.startswith(f"{file}: line 2: ") for p in problems), problems
    accepted = [t for t in tasks if t["source"] == f"{file}: line 2"]
    assert len(accepted) + bool(problems) == 1  # the bad row: a task, or its problems, never lost
    if problems and len(path) and "nested deeper" not in problems[0]:
        assert any("field `" in p or "format:" in p for p in problems), problems


def test_each_seed_row_is_a_task_as_it_is(tmp_path):
    """The fuzz starts from rows that are valid: each is read as a task, with no problem."""
    rows = [json.dumps(row).encode() for name, row in SEEDS.items() if name != "repo"]
    (tasks, problems), _ = read(tmp_path, "seeds", rows)
    assert problems == [] and len(tasks) == len(rows)


@settings(max_examples=25, deadline=5000, suppress_health_check=list(HealthCheck))
@given(data=st.data(), wrong=WRONG)
def test_repository_rows_are_total_up_to_reading_the_snapshot(data, wrong):
    """SWE-bench rows (format stage: the snapshot is looked for, not read) and repository rows
    with an inline snapshot (prepared in full)."""
    for name, row in (("swebench", SWEBENCH), ("repo", SEEDS["repo"])):
        path = data.draw(st.sampled_from(paths(row)), label=f"{name} field")
        bad = replaced(row, path, wrong)
        if name == "swebench":
            (_, task, problem, _), = task_rows("/nowhere/tasks.jsonl", json.dumps(bad).encode())
            assert task is None and problem  # wrong field, or no snapshot beside /nowhere
            continue
        from flywheel.domains.registry import prepare_task
        task, problems = prepare_task(bad)
        assert task is not None or all(p.startswith("field `") or p.startswith("cannot read") for p in problems)


BYTES = [  # (what, the middle line's bytes, its problem or None: read as a task)
    ("not UTF-8", b'{"domain": "open_ended", "task_id": "m", "prompt": "caf\xe9"}', "not UTF-8 text"),
    ("cut short", b'{"domain": "open_ended", "task_id": "m", "pro', "invalid JSON"),
    ("nested past the parser's limit", b'{"domain": "open_ended", "task_id": "m", "prompt": "p", "x": '
     + b"[" * 5000 + b"]" * 5000 + b"}", "invalid JSON: nested deeper"),
    ("nested past the rows' limit", b'{"domain": "open_ended", "task_id": "m", "prompt": "p", "x": '
     + b"[" * 100 + b"]" * 100 + b"}", "field `x`: nested deeper than 64 levels"),
    ("a huge integer", b'{"domain": "open_ended", "task_id": "m", "prompt": "p", "n": ' + b"9" * 5000 + b"}",
     "invalid JSON"),
    ("not an object", b'[1, 2]', "expected a JSON object"),
    ("CRLF", b'{"domain": "open_ended", "task_id": "m", "prompt": "p"}\r', None),
    ("U+2028 and U+0085 in a string", '{"domain": "open_ended", "task_id": "m", "prompt": '
     '"a\u2028b\x85c"}'.encode(), None),  # str.splitlines would cut the line at each
]


@pytest.mark.parametrize("bom", [False, True])
def test_bytes_of_any_kind_are_one_lines_problem(tmp_path, bom):
    good = [json.dumps({"domain": "open_ended", "task_id": f"g{i}", "prompt": "p"}).encode() for i in range(2)]
    for what, middle, problem in BYTES:
        (tasks, problems), file = read(tmp_path, "bytes", [(b"\xef\xbb\xbf" if bom else b"") + good[0],
                                                           middle, good[1]])
        ids = [t["task_id"] for t in tasks]
        if problem is None:
            assert ids == ["g0", "m", "g1"] and problems == [], what
        else:
            assert ids == ["g0", "g1"], what
            assert len(problems) == 1 and problems[0].startswith(f"{file}: line 2: {problem}"), (what, problems)


def test_a_json_document_and_a_parquet_file_are_total(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    document = tmp_path / "rows.json"
    document.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"domain": "open_ended", "task_id": "a", "prompt": "p"},
                                                       5, {"domain": "open_ended", "task_id": "b", "prompt": 7}]).encode())
    tasks, problems = tasks_cli.load_tasks([str(document)])
    assert [t["task_id"] for t in tasks] == ["a"]
    assert problems == [f"{document}: item 2: expected a JSON object, got int",
                        f"{document}: item 3: field `prompt` must be a non-empty string"]
    (tmp_path / "cut.json").write_bytes(b'[{"a": 1}, {"b"')
    assert tasks_cli.load_tasks([str(tmp_path / "cut.json")])[1][0].startswith(f"{tmp_path}/cut.json: invalid JSON")
    parquet = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"domain": ["open_ended"] * 3, "task_id": ["a", "b", "c"],
                             "prompt": ["p", "", "q"]}), parquet)
    tasks, problems = tasks_cli.load_tasks([str(parquet)])
    assert [t["task_id"] for t in tasks] == ["a", "c"]
    assert problems == [f"{parquet}: row 2: field `prompt` must be a non-empty string"]
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    assert "not a readable Parquet file" in tasks_cli.load_tasks([str(tmp_path / "junk.parquet")])[1][0]


@pytest.mark.slow  # a Beam pipeline (3 s): the quick tier reads the same rows through load_tasks
def test_the_pipeline_reads_a_hostile_file_into_one_error_row_per_bad_line(tmp_path):
    """ReadTasks (Beam) over a file mixing good rows with a wrong shape of each format: one
    `input` error row per bad line, naming file and line; the good rows are tasks."""
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to
    from flywheel.transforms.errors import ERRORS_TAG
    from flywheel.transforms.tasks import ReadTasks
    bad = [replaced(SEEDS[name], (field,), value) for name, field, value in
           [("humaneval", "entry_point", 5), ("mbpp", "test_list", [1]), ("gsm8k", "question", None),
            ("spider", "query", {"a": 1}), ("shell", "hidden_variants", [{}]),
            ("fix_function", "visible", [["a"]]), ("render", "reference_code", 3),
            ("python_tests", "timeout_s", "x")]]
    good = [dict(SEEDS["gsm8k"], task_id=f"good-{i}") for i in range(3)]
    lines = [good[0], *bad[:4], good[1], *bad[4:], good[2]]
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    bad_lines = [i for i, r in enumerate(lines, 1) if not str(r.get("task_id")).startswith("good")]
    with TestPipeline() as p:
        out = p | ReadTasks(patterns=[str(path)])
        assert_that(out["tasks"] | beam.Map(lambda t: t["task_id"]), equal_to(["good-0", "good-1", "good-2"]))
        assert_that(out[ERRORS_TAG] | beam.Map(lambda e: e["message"].split(": field")[0].split(": ")[:2]
                                               + ["field `" in e["message"] and e["kind"] == "input"]),
                    equal_to([[str(path), f"line {n}", True] for n in bad_lines]), label="errors")
