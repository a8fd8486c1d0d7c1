"""structured: schema validation, field-by-field credit, reconciliation, malformed and hacks."""

import json
import random

import pytest

from flywheel.domains.registry import get_domain
from flywheel.verifiers import get_verifier

V = get_verifier("structured")
INVOICE = get_domain("extract_invoice").make_task("train", 0, 0)
CONTACT = get_domain("extract_contact").make_task("train", 0, 0)


def dump(value, block=True):
    text = json.dumps(value)
    return f"Here it is:\n```json\n{text}\n```" if block else text


def test_correct_json_in_a_block_or_bare_passes():
    for task in (INVOICE, CONTACT):
        assert V(task, dump(task["expected"])).verdict == "pass"
        assert V(task, "Sure! " + dump(task["expected"], block=False) + " Done.").reward == 1.0


def test_partial_credit_per_field():
    wrong = dict(CONTACT["expected"], city="Nowhere", phone="0")
    v = V(CONTACT, dump(wrong))
    assert v.verdict == "fail" and v.reward == pytest.approx(3 / 5)
    assert v.components["field_city"] == 0.0 and v.components["field_name"] == 1.0


def test_whitespace_and_case_in_strings_do_not_matter():
    loose = {k: f"  {v.upper()} " for k, v in CONTACT["expected"].items()}
    assert V(CONTACT, dump(loose)).reward == 1.0


def test_reconciliation_is_checked_on_the_response_numbers():
    bad = json.loads(json.dumps(INVOICE["expected"]))
    bad["total"] = round(bad["total"] + 1, 2)
    v = V(INVOICE, dump(bad))
    assert v.components["reconcile_1"] == 0.0 and v.components["field_total"] == 0.0
    assert v.verdict == "fail" and 0 < v.reward < 1


def test_schema_violation_scores_zero():
    bad = dict(CONTACT["expected"], extra="field")      # additionalProperties: false
    assert V(CONTACT, dump(bad)).reward == 0.0
    wrong_type = json.loads(json.dumps(INVOICE["expected"]))
    wrong_type["total"] = str(wrong_type["total"])
    assert V(INVOICE, dump(wrong_type)).reward == 0.0


@pytest.mark.parametrize("response", ["", "no json here", "{'name': 'x'}", "```json\n{\"a\": 1,}\n```",
                                      "[1, 2]", "{\"total\": NaN}"])
def test_malformed_json_scores_zero(response):
    v = V(INVOICE, response)
    assert v.reward == 0.0 and v.verdict == "fail"


def test_hacks_score_zero_and_are_flagged():
    expected = CONTACT["expected"]
    hedge = dump(dict(expected, city="Osaka")) + "\nor maybe\n" + dump(dict(expected, city="Porto"))
    v = V(CONTACT, hedge)                               # two different answers: hedging
    assert v.reward == 0.0 and v.exploit_suspected
    dup = json.dumps(expected)[:-1] + ', "city": "Lagos", "city": "Porto"}'
    v = V(CONTACT, dup)                                 # the same key twice
    assert v.reward == 0.0 and v.exploit_suspected
    spray = {k: [v, "x"] for k, v in expected.items()}  # every field a list of guesses
    assert V(CONTACT, dump(spray)).reward == 0.0


@pytest.mark.parametrize("name", ["extract_contact", "extract_invoice"])
def test_generated_extraction_domains(name):
    d, rng = get_domain(name), random.Random(0)
    for i in range(20):
        task = d.make_task("train", i, 0)
        assert V(task, d.demonstration(task, rng)).verdict == "pass"
        assert not d.validate_task(task)


def test_self_consistent_wrong_numbers_earn_nothing():
    """Reconciliation rules check the response's own numbers: on their own they are no reward."""
    wrong = json.loads(json.dumps(INVOICE["expected"]))
    wrong.update(invoice_number="X-0", vendor="Nobody")
    for item in wrong["line_items"]:
        item.update(description="nothing", quantity=7, unit_price=3.0, amount=21.0)
    wrong["total"] = 21.0 * len(wrong["line_items"])
    v = V(INVOICE, dump(wrong))
    assert v.components["schema_valid"] == 1.0
    assert all(v.components[k] == 1.0 for k in v.components if k.startswith("reconcile_"))
    assert not any(v.components[k] for k in v.components if k.startswith("field_"))
    assert v.reward == 0.0 and v.verdict == "fail", v
