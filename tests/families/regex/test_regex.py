"""The regex family: tasks from a seed, patterns read by the linear-time matcher (the same
language as Python's `re` where both read a pattern; hostile patterns refused or bounded), scored
in the bounded verifier worker, and found by the registries with no edit outside its folder."""

import random
import re

import pytest

from flywheel.domains.registry import get_domain, prepare_task
from flywheel.families.regex.matcher import MAX_STATES, RegexError, compile_regex
from flywheel.verifiers import available_verifiers, get_verifier
from flywheel.verifiers.bounded import Bounds, BoundedVerifier

PATTERNS = [r"\d{2,4}", r"ab*c", r"(?:ab)+", r"[a-z]+\d+", r"[a-z]+(?:-[a-z]+)*", r"a|b|", r"(a|b)*c?",
            r"[^abc]x", r"[\d.]+", r"x{3}", r"x{2,}", r"x{,2}", r"\.\*", r"a{", r"[-a]", r"[a-]", r"[]a]",
            r"(a*)*", r"^abc$", r"a.c", r"\s\w\W", r"a+?b", r"(?:a|ab)(?:c|bcd)"]
ALPHABET = "abcx.-]{ 1209\n"


def test_the_matcher_reads_patterns_as_python_does():
    rng = random.Random(0)
    for pattern in PATTERNS:
        regex = compile_regex(pattern)
        for _ in range(200):
            text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6)))
            assert regex.fullmatch(text) == bool(re.fullmatch(pattern, text)), (pattern, text)


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=a)", r"(?i)a", r"a**", r"*a", r"(a", r"a)", "a" * 301,
                                     r"(a{50}){50}", r"a^b", r"\b", r"[b-a]", r"[\D]", "a\\"])
def test_patterns_it_cannot_read_are_refused(pattern):
    with pytest.raises(RegexError):
        compile_regex(pattern)


def test_catastrophic_patterns_answer_in_one_pass():
    """Patterns that make Python's backtracking `re` take exponential time are one state-set pass
    here: at most len(text) x states steps."""
    for pattern in (r"(a+)+$", r"(a|aa)*b", r"(a*)*b", r"(?:a|a)*c", r"(\w+\s?)*!"):
        regex = compile_regex(pattern)
        assert len(regex.states) < MAX_STATES
        assert not regex.fullmatch("a" * 999 + "x")


def test_tasks_are_seeded_and_hide_examples_that_listing_the_shown_ones_fails():
    domain, verifier, rng = get_domain("regex"), get_verifier("regex_match"), random.Random(0)
    assert domain.make_task("train", 3, 7) == domain.make_task("train", 3, 7)
    for i in range(50):
        task = domain.make_task("train", i, 0)
        assert verifier(task, domain.demonstration(task, rng)).verdict == "pass"
        shown = task["prompt"].split("Matches: ")[1].split("\n")[0].split(", ")
        assert shown == [repr(p) for p in task["positives"][:4]] and len(task["positives"]) == 8
        listed = "(?:" + "|".join(re.escape(p) for p in task["positives"][:4]) + ")"
        for wrong in (".*", listed, "", "(?=x)", f"{task['answer']}\n{task['answer']}"):
            assert verifier(task, wrong).reward == 0.0, (task["prompt"], wrong)
        assert verifier(task, f"```regex\n{task['answer']}\n```").verdict == "pass"


def test_scored_in_the_bounded_worker_even_for_hostile_patterns():
    task = {"task_id": "t", "domain": "regex", "prompt": "p", "answer": "a+",
            "positives": ["a" * 900], "negatives": ["a" * 899 + "b"]}
    with BoundedVerifier(Bounds(deadline_s=30)) as worker:
        outcomes = [worker.run(get_verifier("regex_match"), task, r) for r in ("a+", r"(a+)+$", r"(a|aa)*")]
    assert [o.verdict.verdict for o in outcomes] == ["pass", "pass", "pass"], outcomes


def test_the_family_is_found_and_task_rows_are_checked():
    assert get_domain("regex").__module__ == "flywheel.families.regex.regex"
    assert "regex_match" in available_verifiers()
    task, problems = prepare_task({"task_id": "r1", "domain": "regex", "prompt": "digits", "answer": r"\d+",
                                   "positives": ["1", "23"], "negatives": ["a"]})
    assert problems == [] and task["split"] == "train"
    task, problems = prepare_task({"task_id": "r2", "domain": "regex", "prompt": "p", "answer": "a",
                                   "positives": "a", "negatives": [1]})
    assert task is None and len(problems) == 2 and "positives" in problems[0], problems
