"""Document-analysis domains (doc_fields, doc_figures, doc_search, doc_pdf, documents): generated
reports agree with themselves, every reference answer scores 1, generation is the same in every
process, long reports exist, the search tools read the document, users' rows say what is wrong."""

import hashlib
import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest

from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.families.documents.documents_gen import make_report
from flywheel.families.documents.documents_pdf import available as pdf_available
from flywheel.domains.registry import get_domain, prepare_task
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call
from flywheel.verifiers import get_verifier

V = get_verifier("document_fields")
GENERATED = ["doc_fields", "doc_figures", "doc_search"]


def tasks(name, count, split="train", seed=0):
    domain = get_domain(name)
    return [domain.make_task(split, i, seed) for i in range(count)]


@pytest.mark.parametrize("size", ["short", "medium", "long"])
def test_reports_agree_with_themselves(size):
    for i in range(100):
        r = make_report(random.Random(f"{size}{i}"), size)
        f = r.facts
        for y in r.years:
            assert f[f"total_assets_{y}"] == f[f"total_liabilities_and_equity_{y}"]
            assert f[f"total_assets_{y}"] == sum(f[f"{k}_{y}"] for k in (
                "cash", "accounts_receivable", "inventories", "prepaid_and_other", "ppe_net", "goodwill", "intangibles"))
            assert f[f"gross_profit_{y}"] == f[f"revenue_{y}"] - f[f"cost_of_revenue_{y}"]
            assert f[f"net_income_{y}"] == f[f"income_before_tax_{y}"] - f[f"income_tax_{y}"]
            assert f[f"revenue_{y}"] == sum(f[f"segment_{s.lower()}_revenue_{y}"] for s in r.notes["segments"])
            assert f[f"ppe_gross_{y}"] - f[f"accumulated_depreciation_{y}"] == f[f"ppe_net_{y}"]
            assert f[f"net_change_in_cash_{y}"] == (f[f"net_cash_operating_{y}"] + f[f"net_cash_investing_{y}"]
                                                    + f[f"net_cash_financing_{y}"])
            assert f[f"senior_notes_{y}"] + f[f"term_loan_{y}"] == f[f"total_debt_{y}"] \
                == f[f"short_term_debt_{y}"] + f[f"long_term_debt_{y}"]
            assert f[f"cash_{y}"] > 0 and f[f"ppe_net_{y}"] > 0
        for prev, y in zip(r.years, r.years[1:]):
            assert f[f"cash_{y}"] - f[f"cash_{prev}"] == f[f"net_change_in_cash_{y}"]
        assert sum(a for _, a in r.notes["maturities"]) == f[f"total_debt_{r.last}"]
        assert sum(a for _, a in r.notes["leases"]) == f["lease_commitments_total"]


@pytest.mark.parametrize("name", GENERATED)
def test_reference_answers_score_one(name):
    domain, rng = get_domain(name), random.Random(0)
    for task in tasks(name, 50) + tasks(name, 10, "heldout"):
        assert not domain.validate_task(task), domain.validate_task(task)
        verdict = V(task, domain.demonstration(task, rng))
        assert (verdict.reward, verdict.verdict) == (1.0, "pass"), (task["task_id"], verdict)
        assert V(task, task["answer"]).reward == 1.0   # the bare JSON too


@pytest.mark.skipif(not pdf_available(), reason="the `documents` extra (fpdf2, pypdf) is not installed")
def test_pdf_reference_answers_score_one_and_figures_survive_extraction():
    domain, rng = get_domain("doc_pdf"), random.Random(0)
    for task in tasks("doc_pdf", 20):
        assert V(task, domain.demonstration(task, rng)).reward == 1.0
        for f in task["fields"]:
            if f["unit"] == "amount" and f["question"].endswith("as stated"):
                assert f"{abs(int(f['value'])):,}" in task["prompt"], (task["task_id"], f)


def test_pdf_domain_without_the_extra_says_how_to_get_it():
    if pdf_available():
        pytest.skip("the `documents` extra is installed")
    with pytest.raises(ModuleNotFoundError, match=r"flywheel\[documents\]"):
        get_domain("doc_pdf").make_task("train", 0, 0)


def test_stated_figures_are_in_the_document():
    """A field asked `as stated` is printed in its report (so the reference answer is readable)."""
    for task in tasks("doc_fields", 60) + tasks("doc_figures", 30):
        for f in task["fields"]:
            if f["unit"] == "amount" and f["question"].endswith("as stated"):
                assert f"{abs(int(f['value'])):,}" in task["prompt"], (task["task_id"], f["name"])
            if f["unit"] == "count":
                assert f"{int(f['value']):,}" in task["prompt"]


def test_hundreds_of_distinct_tasks_and_both_kinds_of_question():
    many = tasks("doc_fields", 200) + tasks("doc_figures", 200)
    assert len({t["prompt"] for t in many}) == 400
    assert len({t["task_id"] for t in many}) == 400
    formats = Counter(t["format"] for t in many)
    assert set(formats) == {"text", "markdown", "html"} and min(formats.values()) > 60, formats
    ops = Counter(c["op"] for t in tasks("doc_figures", 200) for c in t["checks"])
    assert set(ops) == {"sum", "difference", "ratio", "ratio_pct", "change_pct"}, ops
    rescaled = [t for t in tasks("doc_fields", 100) if "as stated" not in t["fields"][-1]["question"]
                and t["fields"][-1]["unit"] == "amount"]
    assert rescaled, "some tasks ask for amounts in another scale than the report's"


def test_document_lengths_span_short_to_beyond_a_small_context():
    sizes = sorted(t["document_chars"] for t in tasks("doc_fields", 120))
    assert sizes[0] < 3_000 and sizes[-1] > 20_000 and sizes[-1] < 70_000, sizes
    long = sum(s > 20_000 for s in sizes)
    assert 15 <= long <= 50, long
    search = [t["document_chars"] for t in tasks("doc_search", 20)]
    assert min(search) >= 20_000 and max(search) <= 70_000, search


SNIPPET = """
import hashlib, json, sys
from flywheel.domains.registry import get_domain
out = {}
for name in sys.argv[1:]:
    d = get_domain(name)
    for split in ("train", "heldout"):
        for i in range(4):
            t = d.make_task(split, i, 7)
            out[t["task_id"]] = hashlib.sha256(json.dumps(t, sort_keys=True).encode()).hexdigest()
print(json.dumps(out, sort_keys=True))
"""


def test_generation_is_the_same_in_another_process():
    names = GENERATED + (["doc_pdf"] if pdf_available() else [])
    here = {}
    for name in names:
        for split in ("train", "heldout"):
            for i in range(4):
                t = get_domain(name).make_task(split, i, 7)
                here[t["task_id"]] = hashlib.sha256(json.dumps(t, sort_keys=True).encode()).hexdigest()
    for hashseed in ("1", "4242"):
        run = subprocess.run([sys.executable, "-c", SNIPPET, *names], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": hashseed}, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert json.loads(run.stdout) == here


def test_a_different_seed_draws_different_reports():
    a, b = get_domain("doc_fields").make_task("train", 0, 1), get_domain("doc_fields").make_task("train", 0, 2)
    assert a["prompt"] != b["prompt"]


# -- doc_search: the tools over the task's document ----------------------------------------------

def call(name, **arguments):
    return render_call(ToolCall(name, arguments))


def test_search_and_read_show_the_document_and_submit_scores():
    domain = get_domain("doc_search")
    task = domain.make_task("train", 3, 0)
    assert task["document"] not in task["prompt"] and len(task["prompt"]) < 3_000
    runner, state = ToolRunner(None), domain.start_state(task)   # the tools never reach a sandbox
    step = domain.step(task, state, call("search_document", query="total assets"), runner)
    assert "Total assets" in step.observation and step.observation.startswith("line ") and not step.done
    number = int(step.observation.split(":")[0].split()[1])
    step = domain.step(task, state, call("read_document", start=number, end=number + 2), runner)
    assert step.observation.startswith(f"{number}: ") and "Total assets" in step.observation
    assert len(domain.step(task, state, call("read_document", start=1, end=10_000), runner)
               .observation.splitlines()) == 60
    assert "no line contains" in domain.step(task, state, call("search_document", query="zebra crossing"),
                                             runner).observation
    assert domain.step(task, state, call("read_document", start=0), runner).tool_error
    assert domain.step(task, state, call("search_document", query="x" * 500), runner).tool_error
    step = domain.step(task, state, domain.demonstration(task, random.Random(0)), runner)   # plain text: submit
    assert step.done == "submitted"
    assert V(task, domain.final_response(task, step.state)).reward == 1.0


def test_search_is_bounded_on_a_common_word():
    domain = get_domain("doc_search")
    task = domain.make_task("train", 0, 0)
    step = domain.step(task, {}, call("search_document", query="the"), ToolRunner(None))
    lines = step.observation.splitlines()
    assert len(lines) <= 31 and "more matches" in lines[-1]
    assert all(len(line) < 330 for line in lines)


# -- users' documents ------------------------------------------------------------------------------

DOC = "Widget Co. Revenue in 2025 was 1,200 (thousands of USD); cost of revenue was 700."
ROW = {"domain": "documents", "task_id": "mine-1", "document": DOC,
       "fields": [{"name": "revenue", "question": "Revenue 2025, in thousands", "value": 1200},
                  {"name": "cost", "question": "Cost of revenue 2025, in thousands", "value": 700},
                  {"name": "gross_margin_pct", "question": "Gross margin in percent, one decimal",
                   "value": 41.6667, "tolerance": 0.05}],
       "checks": [{"field": "gross_margin_pct", "op": "change_pct", "args": ["revenue", "cost"]}]}


def test_a_users_document_row_becomes_a_task():
    task, problems = prepare_task(ROW)
    assert problems == [] and DOC in task["prompt"] and "gross_margin_pct" in task["prompt"]
    wrong_check = V(task, json.dumps({"revenue": 1200, "cost": 700, "gross_margin_pct": 41.7}))
    assert wrong_check.components["check_gross_margin_pct"] == 0.0   # (1200-700)/700 is 71.4%
    fixed = {**ROW, "checks": [{"field": "gross_margin_pct", "op": "ratio_pct", "args": ["x", "revenue"]}]}
    assert prepare_task(fixed)[1] == ["field `checks[0].args` must list field names, got ['x', 'revenue']"]
    plain, _ = prepare_task({k: v for k, v in ROW.items() if k != "checks"})
    assert V(plain, '{"revenue": 1200, "cost": 700, "gross_margin_pct": 41.7}').verdict == "pass"


@pytest.mark.parametrize("change,problem", [
    ({"document": ""}, "field `document` must be a non-empty string (or give a `prompt`)"),
    ({"fields": []}, "field `fields` must be a non-empty list of {name, question, value}"),
    ({"fields": [{"name": "revenue", "question": "Revenue?", "value": "1,200"}]},
     "field `fields[0].value` must be a number, got '1,200'"),
    ({"fields": [{"name": "revenue", "question": "Revenue?", "value": 1, "tolerance": -1}]},
     "field `fields[0].tolerance` must be >= 0"),
    ({"fields": [{"question": "Revenue?", "value": 1}]},
     "field `fields[0].name` must be a non-empty string of at most 100 characters"),
    ({"fields": [{"name": "a", "question": "A?", "value": 1}, {"name": "a", "question": "A?", "value": 2}]},
     "field `fields[1].name` repeats 'a'"),
    ({"fields": [{"name": "a", "value": 1}]}, "field `fields[0].question` must be a non-empty string"),
    ({"checks": [{"field": "cost", "op": "eval", "args": ["revenue"]}]},
     "field `checks[0].op` must be one of sum, difference, ratio, ratio_pct, change_pct, got 'eval'"),
    ({"checks": [{"field": "profit", "op": "sum", "args": ["revenue"]}]},
     "field `checks[0].field` names no field: 'profit'"),
])
def test_bad_rows_name_the_field(change, problem):
    task, problems = prepare_task({**ROW, **change})
    assert task is None and problem in problems, problems


def test_a_search_episode_runs_through_the_pipelines_turn_and_verify_code():
    """Turn stage's `act` (no sandbox backend needed: the tools run in-process), then `end_episode`
    and Verify in the bounded worker, as a rollout does."""
    from flywheel.transforms.expand import expand_task
    from flywheel.transforms.turn import act, end_episode, start_episode
    from flywheel.transforms.verify import verify_attempt
    from flywheel.verifiers.bounded import BoundedVerifier, Bounds

    domain = get_domain("doc_search")
    task = domain.make_task("heldout", 2, 0)
    attempt, = expand_task(task, run_id="r", iteration=0, policy_version=0, seed=0, n_samples=1,
                           temperature=1.0, mode="train")
    attempt = start_episode(attempt, EpisodeSettings())
    assert attempt.episode.max_turns == 8 and [t["name"] for t in attempt.episode.tools] == \
        ["search_document", "read_document", "submit"]
    runner = ToolRunner(None)
    actions = [call("search_document", query="net income"), domain.demonstration(task, random.Random(0))]
    for n, action in enumerate(actions):
        attempt = attempt.replace(turns=[*attempt.turns, {"action": action, "action_start": n, "action_end": n + 1}])
        attempt, error = act(attempt, runner, EpisodeSettings())
        assert error is None and attempt.failure is None
    assert "Net income" in attempt.turns[0]["observation"] and attempt.turns[0]["tool"] == "search_document"
    assert attempt.episode.end == "submitted"
    ended = end_episode(attempt)
    with BoundedVerifier(Bounds(deadline_s=5, memory_mb=512)) as worker:
        scored, error = verify_attempt(ended, worker)
    assert error is None and (scored.verdict, scored.reward_raw) == ("pass", 1.0)


def test_a_users_row_for_doc_search_keeps_the_document_out_of_the_prompt():
    task, problems = prepare_task({**ROW, "domain": "doc_search"})
    assert problems == [] and DOC not in task["prompt"] and "search_document" in task["prompt"]
    step = get_domain("doc_search").step(task, {}, call("search_document", query="cost of"), ToolRunner(None))
    assert step.observation == f"line 1: {DOC}"
    assert prepare_task({k: v for k, v in ROW.items() if k != "document"} | {"domain": "doc_search"})[1] == [
        "field `document` must be a non-empty string"]
    assert prepare_task({k: v for k, v in ROW.items() if k != "document"})[1] == [
        "field `document` must be a non-empty string (or give a `prompt`)"]


@pytest.mark.parametrize("name", ["doc_fields", "doc_figures", "doc_search"])
def test_answer_keys_read_the_figures_as_the_verifier_does(name):
    """maj@N votes on the verifier's reading: figures within tolerance vote together, a wrong one
    apart; no JSON object, no figure, or an over-long reply has no key."""
    domain = get_domain(name)
    task = domain.make_task("train", 3, 0)
    reference = domain.demonstration(task, random.Random(0))
    answer = {f["name"]: f["value"] for f in task["fields"]}
    key = domain.answer_key(task, reference)
    assert key and key == domain.answer_key(task, json.dumps(answer))
    first = task["fields"][0]
    near = {**answer, first["name"]: first["value"] + 0.4 * float(first.get("tolerance") or 0)}
    assert domain.answer_key(task, f"Here:\n```json\n{json.dumps(near)}\n```") == key
    wrong = {**answer, first["name"]: first["value"] + 1000}
    assert domain.answer_key(task, json.dumps(wrong)) != key
    assert domain.answer_key(task, "about 5 million") is None
    assert domain.answer_key(task, json.dumps({"other": 1})) is None
    assert domain.answer_key(task, json.dumps({first["name"]: 10 ** 400})) is None
    assert domain.answer_key(task, json.dumps(answer) + " " * 40_000) is None
    assert domain.answer_key(task, "[" * 100_000) is None
