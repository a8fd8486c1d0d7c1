"""The domains, tasks validate and verify commands, end to end on real files and the sandbox."""

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq

from flywheel.domains.registry import get_domain
from flywheel.cli import domains as domains_cli, tasks as tasks_cli, verify as verify_cli


def test_domains_lists_at_least_100_with_tier_verifier_and_count(capsys):
    assert domains_cli.main(["domains", "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) >= 100
    by_name = {r["name"]: r for r in rows}
    assert by_name["add"]["tasks"] == "generated" and by_name["add"]["verifier"] == "numeric_match"
    assert by_name["py_functions"]["tasks"] == 8 and by_name["rg_chain_sum"]["tier"] == 2
    assert {r["verifier"] for r in rows} >= {"python_tests", "math_answer", "structured",
                                            "sql_result", "shell_state", "reasoning_gym"}
    assert by_name["shell_files"]["tools"] == ["run_shell", "write_file", "submit"]
    assert by_name["py_mbpp"]["tools"] == ["run_tests", "run_code", "submit"]
    assert domains_cli.main(["domains", "--prefix", "sql"]) == 0
    assert "sql_shop" in capsys.readouterr().out


def test_tools_are_valid_json_schemas():
    import jsonschema
    from flywheel.domains.registry import all_domains
    for domain in all_domains().values():
        for tool in domain.tools:
            jsonschema.Draft202012Validator.check_schema(tool.parameters)


def write_jsonl(path, rows, gz=False):
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n"
    (gzip.open(path, "wt") if gz else open(path, "w")).write(text)
    return str(path)


HE = get_domain("py_functions").tasks("train")[0]


def test_validate_reports_file_line_and_field(tmp_path, capsys):
    good = {k: HE[k] for k in ("task_id", "prompt", "entry_point", "test")}
    rows = [good, {**good, "task_id": "b"}, "{not json", [1, 2], {"task_id": "c", "prompt": "p"},
            {**good, "task_id": "d", "domain": "nope"}, {**good, "task_id": "b"},
            {**good, "task_id": "e", "test": "def check(candidate):\n    pass\n"},
            {"task_id": "f", "domain": "math", "prompt": "1+1?"},
            {"task_id": "g", "domain": "sql", "prompt": "q", "fixture": "CREATE TABLE t(x);"}]
    path = write_jsonl(tmp_path / "tasks.jsonl.gz", rows, gz=True)
    assert tasks_cli.main(["tasks", "validate", path, "--domain", "python_tests"]) == 1
    out = capsys.readouterr().out
    for expected in ["line 3: invalid JSON", "line 4: expected a JSON object",
                     "line 5: field `test` missing", "line 6: field `domain`: unknown domain 'nope'",
                     "line 7: field `task_id`: 'b' repeats", "line 8: field `test`: the task's tests hold no assert",
                     "line 9: field `answer` missing", "line 10: field `reference_query` missing",
                     "2 valid tasks, 8 problems"]:
        assert expected in out.replace("\n", " "), (expected, out)


def test_validate_reads_parquet(tmp_path, capsys):
    table = pa.Table.from_pylist([{"task_id": "a", "domain": "math", "prompt": "1+1?", "answer": "2"},
                                  {"task_id": "b", "domain": "math", "prompt": "1+1?", "answer": None}])
    pq.write_table(table, tmp_path / "t.parquet")
    assert tasks_cli.main(["tasks", "validate", str(tmp_path / "*.parquet"), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["tasks"] == 1 and report["problems"][0].endswith("row 2: field `answer` missing")


def test_verify_on_a_humaneval_file(tmp_path, capsys):
    tasks = get_domain("py_functions").tasks("train")
    task_file = write_jsonl(tmp_path / "he.jsonl", [{k: v for k, v in t.items() if k != "domain"}
                                                    for t in tasks])
    first = tasks[0]
    responses = [{"task_id": t["task_id"], "response": t["canonical_solution"]} for t in tasks]
    responses += [{"task_id": first["task_id"], "response": "    return None\n"},           # wrong
                  {"task_id": first["task_id"], "response": "import sys\nsys.exit(0)\n"},  # hack
                  {"task_id": first["task_id"], "response": "class A:\n    def __eq__(s, o):\n"
                   "        return True\ndef running_max(xs):\n    return A()\n"},      # hack
                  {"task_id": "missing", "response": "x"}]
    response_file = write_jsonl(tmp_path / "responses.jsonl", responses)
    assert verify_cli.main(["verify", "--tasks", task_file, "--responses", response_file,
                            "--domain", "python_tests"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == len(responses)
    assert all(line["reward"] == 1.0 and line["verdict"] == "pass" for line in lines[:len(tasks)])
    wrong, exit_hack, eq_hack, missing = lines[len(tasks):]
    assert wrong["reward"] == 0.0 and not wrong["filtered"]
    for hack in (exit_hack, eq_hack):
        assert hack["reward"] == 0.0 and hack["filtered"] and hack["filter_reason"] == "exploit_suspected"
    assert missing["filter_reason"] == "input_error"
    assert set(lines[0]) >= {"task_id", "reward", "verdict", "reward_components", "filtered", "filter_reason"}


def test_verify_scores_non_sandbox_kinds_too(tmp_path, capsys):
    tasks = [{"task_id": "m1", "domain": "math", "prompt": "half?", "answer": "1/2"},
             get_domain("extract_contact").make_task("train", 0, 0)]
    task_file = write_jsonl(tmp_path / "t.jsonl", tasks)
    responses = [{"task_id": "m1", "response": "\\boxed{0.5}"},
                 {"task_id": tasks[1]["task_id"], "response": json.dumps(tasks[1]["expected"])}]
    assert verify_cli.main(["verify", "--tasks", task_file, "--responses",
                            write_jsonl(tmp_path / "r.jsonl", responses)]) == 0
    assert [json.loads(x)["verdict"] for x in capsys.readouterr().out.splitlines()] == ["pass", "pass"]
