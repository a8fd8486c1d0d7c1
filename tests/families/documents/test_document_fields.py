"""document_fields: credit per field, derived figures tied to their own inputs, units and rounding
as the task states them, and hostile answers (hedging, copies of the document, self-consistent
wrong numbers, oversized or pathological JSON) refused within a bounded time."""

import json
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from flywheel.domains.registry import get_domain
from flywheel.verifiers import get_verifier

V = get_verifier("document_fields")
FIELDS = get_domain("doc_fields")
FIGURES = get_domain("doc_figures")


def first(domain, pred, count=300):
    """The first generated task of `domain` that satisfies `pred`."""
    return next(t for t in (domain.make_task("train", i, 0) for i in range(count)) if pred(t))


def reference(task):
    return json.loads(task["answer"])


def block(answer):
    return "My answer:\n```json\n" + json.dumps(answer) + "\n```"


FIVE = first(FIELDS, lambda t: len(t["fields"]) == 5 and all(f["unit"] == "amount" for f in t["fields"]))
MARGIN = first(FIGURES, lambda t: len(t["checks"]) == 1 and t["checks"][0]["op"] == "ratio_pct"
               and len(t["fields"]) == 3)


def test_partial_credit_per_field():
    answer = reference(FIVE)
    wrong = FIVE["fields"][1]["name"]
    answer[wrong] += 1
    v = V(FIVE, block(answer))
    assert (v.reward, v.verdict) == (pytest.approx(0.8), "fail")
    assert v.components[f"field_{wrong}"] == 0.0 and sum(v.components.values()) == 1 + 4
    del answer[FIVE["fields"][0]["name"]]
    v = V(FIVE, block(answer))
    assert v.reward == pytest.approx(0.6) and "missing" in v.detail


def test_a_derived_figure_must_agree_with_its_own_inputs():
    names = [f["name"] for f in MARGIN["fields"]]     # two inputs, then the margin
    right = reference(MARGIN)
    off = dict(right, **{names[2]: right[names[2]] + 1.0})       # inputs right, margin wrong
    v = V(MARGIN, block(off))
    assert v.components[f"check_{names[2]}"] == 0.0 and v.components[f"field_{names[2]}"] == 0.0
    assert v.reward == 0.0 and v.verdict == "fail"               # (2/3 fields) x (0/1 checks)
    slipped = dict(right, **{names[0]: round(right[names[0]] * 1.1)})   # an input misread, margin right
    v = V(MARGIN, block(slipped))
    assert v.components[f"check_{names[2]}"] == 0.0 and v.reward == 0.0


def test_self_consistent_wrong_numbers_earn_nothing():
    a, b, figure = [f["name"] for f in MARGIN["fields"]]
    invented = {a: 300, b: 1200, figure: 25.0}                   # 300 / 1200 = 25%: consistent, false
    v = V(MARGIN, block(invented))
    assert v.components[f"check_{figure}"] == 1.0
    assert not any(v.components[f"field_{n}"] for n in (a, b, figure))
    assert (v.reward, v.verdict) == (0.0, "fail")


def test_any_correct_rounding_passes_and_a_wrong_one_does_not():
    spec = MARGIN["fields"][2]
    exact, answer = spec["value"], reference(MARGIN)
    for stated, ok in [(exact, True), (round(exact, 1), True), (round(exact, 3), True),
                       (round(exact, 1) + 0.1, False), (round(exact, 1) - 0.1, False)]:
        v = V(MARGIN, block(dict(answer, **{spec["name"]: stated})))
        assert v.components[f"field_{spec['name']}"] == float(ok), (stated, exact)
    half = {"prompt": "p", "fields": [{"name": "m", "value": 23.45, "tolerance": 0.05 + 1e-9}]}   # exactly x.x5
    assert [V(half, json.dumps({"m": m})).reward for m in (23.4, 23.5, 23.3, 23.6)] == [1.0, 1.0, 0.0, 0.0]


def test_percent_is_not_a_fraction_and_scale_is_read():
    spec = MARGIN["fields"][2]
    v = V(MARGIN, block(dict(reference(MARGIN), **{spec["name"]: spec["value"] / 100})))
    assert v.components[f"field_{spec['name']}"] == 0.0 and "fraction where a percent" in v.detail
    rescaled = first(FIELDS, lambda t: "millions of" in t["fields"][0]["question"] and "as stated" not in t["fields"][0]["question"])
    spec = rescaled["fields"][0]
    raw = dict(reference(rescaled), **{spec["name"]: spec["value"] * 1000})   # the report's thousands
    v = V(rescaled, block(raw))
    assert v.components[f"field_{spec['name']}"] == 0.0 and "wrong scale" in v.detail


def test_numbers_must_be_json_numbers():
    answer = {k: f"{v:,}" for k, v in reference(FIVE).items()}   # "1,234": text, not a number
    v = V(FIVE, block(answer))
    assert v.reward == 0.0 and "not a number" in v.detail


@pytest.mark.parametrize("response", ["", "I don't know.", "<answer>0</answer>", "```json\n{}\n```",
                                      "```json\n[1, 2, 3]\n```", "{\"a\": 1}", "null", "```python\npass\n```"])
def test_non_answers_score_zero(response):
    for task in (FIVE, MARGIN):
        v = V(task, response)
        assert (v.reward, v.verdict) == (0.0, "fail"), (response, v)


def test_hedging_is_refused():
    answer = reference(FIVE)
    candidates = {k: [v, v + 1, v * 1000] for k, v in answer.items()}
    v = V(FIVE, block(candidates))
    assert (v.reward, v.exploit_suspected) == (0.0, True) and v.components["exploit_candidate_lists"] == 1.0
    one_list = dict(answer, **{FIVE["fields"][0]["name"]: [answer[FIVE["fields"][0]["name"]]]})
    assert V(FIVE, block(one_list)).exploit_suspected
    first_name = FIVE["fields"][0]["name"]
    twice = json.dumps(answer)[:-1] + f', "{first_name}": 0}}'
    v = V(FIVE, twice)
    assert v.reward == 0.0 and v.components["exploit_duplicate_keys"] == 1.0
    other = dict(answer, **{first_name: 1})
    v = V(FIVE, block(other) + "\nor rather\n" + block(answer))
    assert v.reward == 0.0 and v.components["exploit_multiple_answers"] == 1.0


def test_copying_the_document_is_refused_even_with_the_right_answer():
    for task in (FIVE, MARGIN, get_domain("doc_search").make_task("train", 1, 0)):
        doc = task.get("document") or task["prompt"]      # doc_search's prompt does not hold it
        v = V(task, doc + "\n" + block(reference(task)))
        assert (v.reward, v.exploit_suspected) == (0.0, True), v
        v = V(task, doc[: len(doc) // 2] + block(reference(task)))
        assert v.reward == 0.0 and v.exploit_suspected
    quoted = FIVE["prompt"].splitlines()[-6:]          # a few quoted lines are fine
    assert V(FIVE, "\n".join(quoted) + "\n" + block(reference(FIVE))).reward == 1.0


def test_optional_fields_give_credit_but_do_not_decide_the_pass():
    task = dict(FIVE, fields=[dict(f, required=(i != 0)) for i, f in enumerate(FIVE["fields"])])
    answer = reference(task)
    answer[task["fields"][0]["name"]] += 5
    v = V(task, block(answer))
    assert v.verdict == "pass" and v.reward == pytest.approx(0.8)


HOSTILE = {
    "huge_float": lambda names: json.dumps({n: 1e308 for n in names}).replace("1e+308", "1e999"),
    "long_integer": lambda names: "{" + ", ".join(f'"{n}": {"9" * 4000}' for n in names) + "}",
    "too_many_digits": lambda names: '{"%s": %s}' % (names[0], "9" * 5000),
    "deep": lambda names: '{"%s": ' % names[0] + "[" * 50_000 + "]" * 50_000 + "}",
    "wide": lambda names: json.dumps({f"k{i}": i for i in range(3000)}),
    "oversized": lambda names: "x" * 200_000 + json.dumps({n: 1 for n in names}),
    "many_blocks": lambda names: "```json\n{}\n```\n" * 5000,
    "braces": lambda names: "{" * 100_000,
    "nan": lambda names: '{"%s": NaN}' % names[0],
    "bools": lambda names: json.dumps({n: True for n in names}),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_answers_score_zero_quickly(kind):
    names = [f["name"] for f in MARGIN["fields"]]
    response = HOSTILE[kind](names)
    started = time.perf_counter()
    v = V(MARGIN, response)
    assert time.perf_counter() - started < 2.0, kind
    assert (v.reward, v.verdict) == (0.0, "fail"), (kind, v)


def test_measured_scores_of_reference_partial_wrong_and_hostile_answers():
    """The figures the closing note quotes, over 50 tasks per domain."""
    rng, means = random.Random(0), {}
    for domain in (FIELDS, FIGURES):
        scores = {"reference": [], "one_field_off": [], "all_wrong": [], "copied": []}
        for i in range(50):
            task = domain.make_task("train", i, 0)
            answer = reference(task)
            scores["reference"].append(V(task, domain.demonstration(task, rng)).reward)
            name = task["fields"][0]["name"]
            scores["one_field_off"].append(V(task, block(dict(answer, **{name: answer[name] * 2 + 1}))).reward)
            scores["all_wrong"].append(V(task, block({k: v * 2 + 1 for k, v in answer.items()})).reward)
            scores["copied"].append(V(task, task["prompt"] + block(answer)).reward)
        means[domain.name] = {k: sum(v) / len(v) for k, v in scores.items()}
    for name, m in means.items():
        assert m["reference"] == 1.0 and m["all_wrong"] == 0.0 and m["copied"] == 0.0, (name, m)
    assert 0.6 < means["doc_fields"]["one_field_off"] < 0.85, means        # (k-1)/k for k in 3..6
    assert 0.0 < means["doc_figures"]["one_field_off"] < 0.8, means


FRAGMENTS = ["```json\n", "```", "{", "}", "[", "]", '"', ":", ",", "1e999", "-", "0.5", "9" * 400,
             "NaN", "true", "null", "\x00", "\ud800", "\n", "%", "1,234", "(12)"]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(pieces=st.lists(st.sampled_from(FRAGMENTS) | st.sampled_from(["k", "v"]), max_size=60),
       values=st.lists(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=5), st.none(),
                                 st.lists(st.integers(), max_size=3)), min_size=3, max_size=3))
def test_any_response_gets_a_bounded_verdict(pieces, values):
    names = [f["name"] for f in MARGIN["fields"]]
    text = "".join(names[0] if p == "k" else str(values[0]) if p == "v" else p for p in pieces)
    for response in (text, json.dumps(dict(zip(names, values)), default=str)):
        started = time.perf_counter()
        v = V(MARGIN, response)
        assert time.perf_counter() - started < 1.0
        assert v.verdict in ("pass", "fail") and 0.0 <= v.reward <= 1.0
        assert v.verdict == "fail" or v.reward == 1.0


@pytest.fixture(scope="module")
def bounded():
    from flywheel.verifiers.bounded import BoundedVerifier, Bounds
    with BoundedVerifier(Bounds(deadline_s=3, memory_mb=512)) as worker:
        yield worker


@pytest.mark.parametrize("kind", ["deep", "oversized", "long_integer", "many_blocks"])
def test_hostile_answers_through_the_bounded_worker_are_model_failures(kind, bounded):
    from flywheel.transforms.expand import expand_task
    from flywheel.transforms.verify import verify_attempt
    attempt, = expand_task(MARGIN, run_id="t", iteration=0, policy_version=0, seed=0, n_samples=1,
                           temperature=0.0, mode="eval")
    response = HOSTILE[kind]([f["name"] for f in MARGIN["fields"]])
    out, error = verify_attempt(attempt.replace(response=response), bounded)
    assert (out.verdict, out.reward_raw, out.failure) == ("fail", 0.0, None), out.verdict_detail
    assert error is None or error["kind"] == "model"
