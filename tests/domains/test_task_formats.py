"""Published task formats recognised on sight: sample rows written in each format (HumanEval, MBPP,
GSM8K, MATH, Spider) are read without a `domain`, reported per file (per line when mixed), and
score through the pipeline's own Execute/Verify code as the domain they map onto."""

import json
import sqlite3
import subprocess

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline as BeamPipeline
from apache_beam.testing.util import assert_that, equal_to

from flywheel.families.math.formats import last_boxed
from flywheel.cli import tasks as tasks_cli
from flywheel.cli.verify import verify_responses
from flywheel.transforms.tasks import ReadTasks

HUMANEVAL = {
    "task_id": "HumanEval/900",
    "prompt": "def increment_all(xs: list) -> list:\n    \"\"\"Add one to every number.\n"
              "    >>> increment_all([1, 2])\n    [2, 3]\n    \"\"\"\n",
    "canonical_solution": "    return [x + 1 for x in xs]\n",
    "test": "\n\nMETADATA = {'author': 'flywheel', 'dataset': 'test'}\n\n\ndef check(candidate):\n"
            "    assert candidate([1, 2]) == [2, 3]\n    assert candidate([]) == []\n"
            "    assert candidate([-1]) == [0]\n",
    "entry_point": "increment_all",
}
MBPP = {
    "task_id": 901,
    "text": "Write a function to return the larger of two numbers.",
    "code": "def larger(a, b):\r\n  return a if a > b else b",
    "test_list": ["assert larger(1, 2) == 2", "assert larger(5, 3) == 5", "assert larger(-1, -4) == -1"],
    "test_setup_code": "",
    "challenge_test_list": [],
}
GSM8K = {
    "question": "Lena buys 3 packs of pencils with 12 pencils in each pack. She gives 7 pencils "
                "to her brother. How many pencils does she have left?",
    "answer": "Lena buys 3 * 12 = <<3*12=36>>36 pencils.\nAfter giving 7 away she has "
              "36 - 7 = <<36-7=29>>29 pencils.\n#### 29",
}
GSM8K_THOUSANDS = {
    "question": "A shop sells 250 mugs a day for 5 days. How many mugs does it sell?",
    "answer": "It sells 250 * 5 = <<250*5=1250>>1250 mugs.\n#### 1,250",
}
MATH = {
    "problem": "Compute $\\frac{1}{2} + \\frac{1}{3}$.",
    "level": "Level 1",
    "type": "Prealgebra",
    "solution": "With a common denominator, $\\frac{1}{2} + \\frac{1}{3} = \\frac{3}{6} + "
                "\\frac{2}{6} = \\boxed{\\frac{5}{6}}$.",
}
SHOP = ("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);\n"
        "INSERT INTO customers VALUES (1, 'Ada', 'Oslo'), (2, 'Bo', 'Lima'), (3, 'Cyd', 'Oslo');")
SPIDER = {
    "db_id": "shop",
    "query": "SELECT count(*) FROM customers WHERE city = 'Oslo'",
    "query_toks": ["SELECT", "count", "(", "*", ")", "FROM", "customers", "WHERE", "city", "=",
                   "'Oslo'"],
    "question": "How many customers live in Oslo?",
    "question_toks": ["How", "many", "customers", "live", "in", "Oslo", "?"],
}
SAMPLES = {"humaneval": (HUMANEVAL, "    return [x + 1 for x in xs]\n", "python_tests"),
           "mbpp": (MBPP, "def larger(a, b):\n    return max(a, b)\n", "python_tests"),
           "gsm8k": (GSM8K, "36 - 7 leaves \\boxed{29}.", "math"),
           "math": (MATH, "The sum is \\boxed{\\frac{5}{6}}.", "math"),
           "spider": ({**SPIDER, "fixture": SHOP},
                      "```sql\nSELECT COUNT(id) FROM customers WHERE city = 'Oslo';\n```", "sql")}
TITLES = {"humaneval": "HumanEval", "mbpp": "MBPP", "gsm8k": "GSM8K", "math": "MATH",
          "spider": "Spider-like SQL"}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def validate(capsys, *argv):
    status = tasks_cli.main(["tasks", "validate", *argv])
    return status, capsys.readouterr().out.splitlines()


def test_each_format_is_recognised_from_a_sample_file(tmp_path, capsys):
    for name, (row, _, domain) in SAMPLES.items():
        path = write_jsonl(tmp_path / f"{name}.jsonl", [row])
        status, lines = validate(capsys, path)
        assert status == 0, lines
        assert lines == [f"{path}: {TITLES[name]} format (domain {domain}), 1 rows",
                         "1 valid tasks, 0 problems"]


def test_each_format_scores_as_its_domain(tmp_path):
    paths = [write_jsonl(tmp_path / f"{name}.jsonl", [row]) for name, (row, _, _) in SAMPLES.items()]
    tasks, problems = tasks_cli.load_tasks(paths)
    assert problems == [] and [t["domain"] for t in tasks] == [d for _, _, d in SAMPLES.values()]
    by_domain = {t["source"].rsplit("/", 1)[1].split(".")[0]: t for t in tasks}
    assert by_domain["gsm8k"]["answer"] == "29" and by_domain["math"]["answer"] == "\\frac{5}{6}"
    assert by_domain["mbpp"]["task_id"] == "mbpp/901" and "assert larger(1, 2)" in by_domain["mbpp"]["prompt"]
    assert by_domain["gsm8k"]["task_id"].startswith("gsm8k-")
    right = [{"task_id": by_domain[n]["task_id"], "response": SAMPLES[n][1]} for n in SAMPLES]
    wrong = [{"task_id": by_domain[n]["task_id"], "response": "42"} for n in SAMPLES]
    lines = list(verify_responses(tasks, right + wrong))
    assert [line["verdict"] for line in lines] == ["pass"] * 5 + ["fail"] * 5, lines
    assert [line["domain"] for line in lines[:5]] == [d for _, _, d in SAMPLES.values()]


def test_a_file_mixing_formats_is_reported_per_line(tmp_path, capsys):
    own = {"task_id": "own-1", "domain": "math", "prompt": "What is 2+2?", "answer": "4"}
    path = write_jsonl(tmp_path / "mixed.jsonl", [HUMANEVAL, GSM8K, own, GSM8K_THOUSANDS])
    status, lines = validate(capsys, path)
    assert status == 0
    assert lines == [f"{path}: mixes task formats (GSM8K format (domain math) 2, HumanEval format "
                     "(domain python_tests) 1, rows name their own `domain` 1); by line:",
                     f"{path}: line 1: HumanEval format (domain python_tests)",
                     f"{path}: line 2: GSM8K format (domain math)",
                     f"{path}: line 3: rows name their own `domain`",
                     f"{path}: line 4: GSM8K format (domain math)",
                     "4 valid tasks, 0 problems"]
    tasks, _ = tasks_cli.load_tasks([path])
    assert tasks[3]["answer"] == "1250"  # GSM8K's thousands separator is not part of the number


def test_domain_flag_overrides_the_formats_domain(tmp_path, capsys):
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [GSM8K])
    status, lines = validate(capsys, path, "--domain", "sql")
    assert status == 1 and f"{path}: line 1: field `fixture` missing" in lines[1]
    tasks, problems = tasks_cli.load_tasks([path], "math_linear")
    assert problems == [] and tasks[0]["domain"] == "math_linear" and tasks[0]["answer"] == "29"


def test_rows_in_no_format_say_what_was_expected(tmp_path, capsys):
    path = write_jsonl(tmp_path / "odd.jsonl", [{"question": "Six times seven?", "answer": "42"},
                                                {"instruction": "x"},
                                                {**SPIDER, "db_id": "nowhere"}])
    status, lines = validate(capsys, path)
    assert status == 1
    assert (f"{path}: line 1: field `domain` missing, and looks like GSM8K (question, answer), but "
            "field `answer` does not end in '#### N'; name the domain in the row or with --domain") in lines
    assert any(line.startswith(f"{path}: line 2: field `domain` missing, and the fields match no "
                               "known task format: GSM8K (question, answer); Harbor task folder "
                               "(instruction, task_toml, harbor_files); HumanEval (prompt, "
                               "entry_point, test);") for line in lines)
    assert any(line.startswith(f"{path}: line 3: Spider-like SQL format: the SQLite database ")
               and "nowhere.sqlite is not a local file" in line for line in lines)


def test_spider_layout_database_beside_the_task_file(tmp_path):
    folder = tmp_path / "database" / "shop"
    folder.mkdir(parents=True)
    con = sqlite3.connect(folder / "shop.sqlite")
    con.executescript(SHOP)
    con.commit()
    con.close()
    path = write_jsonl(tmp_path / "dev.jsonl", [SPIDER])
    tasks, problems = tasks_cli.load_tasks([path])
    assert problems == [] and tasks[0]["domain"] == "sql"
    assert "CREATE TABLE customers" in tasks[0]["prompt"] and "'Cyd'" in tasks[0]["fixture"]
    line, = verify_responses(tasks, [{"task_id": tasks[0]["task_id"], "response": SPIDER["query"]}])
    assert line["verdict"] == "pass"


def test_the_pipeline_reads_formats_too(tmp_path):
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [GSM8K, {"question": "q", "answer": "no mark"}])
    with BeamPipeline() as p:
        out = p | ReadTasks(patterns=[path])
        assert_that(out["tasks"] | beam.Map(lambda t: (t["domain"], t["answer"])),
                    equal_to([("math", "29")]), label="tasks")
        assert_that(out["errors"] | beam.Map(lambda e: "does not end in '#### N'" in e["message"]),
                    equal_to([True]), label="errors")


def test_validate_through_a_pipe_names_the_format(tmp_path):
    path = write_jsonl(tmp_path / "humaneval.jsonl", [HUMANEVAL, {**HUMANEVAL, "task_id": "HumanEval/901"}])
    done = subprocess.run(f"flywheel tasks validate {path} | grep format", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout == f"{path}: HumanEval format (domain python_tests), 2 rows\n", done.stderr


def test_last_boxed_balances_braces():
    assert last_boxed("\\boxed{1} then \\boxed{\\frac{a}{b}}") == "\\frac{a}{b}"
    assert last_boxed("\\fbox{x^{2}}") == "x^{2}" and last_boxed("\\boxed{unclosed") is None


def test_json_documents_as_published_spider_dev_json_and_math_problem_files(tmp_path, capsys):
    folder = tmp_path / "spider" / "database" / "shop"
    folder.mkdir(parents=True)
    con = sqlite3.connect(folder / "shop.sqlite")
    con.executescript(SHOP)
    con.commit()
    con.close()
    dev = tmp_path / "spider" / "dev.json"  # Spider ships one JSON array per split
    dev.write_text(json.dumps([SPIDER, {**SPIDER, "question": "How many customers?",
                                        "query": "SELECT count(*) FROM customers"}], indent=2))
    status, lines = validate(capsys, str(dev))
    assert status == 0 and lines[0] == f"{dev}: Spider-like SQL format (domain sql), 2 rows"
    problems = tmp_path / "MATH" / "test" / "prealgebra"  # MATH: one JSON object per problem
    problems.mkdir(parents=True)
    (problems / "1.json").write_text(json.dumps(MATH, indent=4))
    (problems / "2.json").write_text("[1, 2]")
    status, lines = validate(capsys, str(problems / "*.json"))
    assert lines[0] == f"{problems / '1.json'}: MATH format (domain math), 1 rows"
    assert f"{problems / '2.json'}: item 1: expected a JSON object, got int" in lines
    assert lines[-1] == "1 valid tasks, 2 problems"
    assert not any(line.startswith(f"{problems / '2.json'}: rows") for line in lines)
