"""Examples shown in the prompt count as shown: a hidden case the prompt's examples give away is
visible (it cannot pay as hidden), and a response that is a lookup table of them earns nothing.

The hole this closes: a HumanEval-style task without `visible_test` had only hidden cases, so a
lookup table of its docstring's `>>>` examples passed the hidden cases equal to them, unflagged.
Examples are matched by their syntax trees and literal values, not their text.
"""

import pytest

from flywheel.families.python.case_plan import case_names, shown_examples
from flywheel.families.python.case_plan import test_plan as plan_of  # (a test_ name pytest would collect)
from flywheel.domains.registry import get_domain
from flywheel.families.python.shown_examples import prompt_examples
from flywheel.verifiers import get_verifier

# A docstring with examples in several hands: a `...` continuation, odd spacing, double quotes where
# the tests use single ones, a keyword argument, and an inline `➞` example.
PROMPT = '''def pad(words, width=3, fill="."):
    """Pad each word on the right with `fill` to `width` characters.
    >>> pad(["ab",
    ...      "c"])
    ['ab.', 'c..']
    >>> pad( ["xyz"],width = 5 )
    ['xyz..']
    >>> pad(["a"], fill="-")
    ['a--']

    pad(["hello"], 2) ➞ ['hello']
    """
'''
CANONICAL = "    return [w + fill * (width - len(w)) for w in words]\n"
SHOWN_CASES = ["assert candidate(['ab', 'c']) == ['ab.', 'c..']",
               "assert candidate(['xyz'], 5) == ['xyz..']",
               "assert candidate(words=['a'], fill='-') == ['a--']",
               "assert candidate(['hello'], width=2) == ['hello']"]
UNSHOWN_CASES = ["assert candidate([]) == []", "assert candidate(['q'], 4, '*') == ['q***']",
                 "assert candidate(['ab', 'c'], 4) == ['ab..', 'c...']",    # shown arguments, and one more
                 "assert candidate(['ab', 'c']) == sorted(['c..', 'ab.'])",  # a computed expected value
                 "for w in ['x', 'yy']:\n        assert len(candidate([w])[0]) == 3"]
TASK = {"task_id": "t/pad", "domain": "python_tests", "prompt": PROMPT, "entry_point": "pad",
        "test": "def check(candidate):\n" + "".join(f"    {c}\n" for c in SHOWN_CASES + UNSHOWN_CASES),
        "canonical_solution": CANONICAL, "answer": ""}
LOOKUP = ("    table = {(('ab', 'c'), 3, '.'): ['ab.', 'c..'], (('xyz',), 5, '.'): ['xyz..'],\n"
          "             (('a',), 3, '-'): ['a--'], (('hello',), 2, '.'): ['hello']}\n"
          "    return table.get((tuple(words), width, fill), [])\n")


def test_docstring_examples_are_read_by_their_syntax_tree():
    sources = {source for _, _, source in prompt_examples(PROMPT, frozenset({"pad"}))}
    assert sources == {"pad(['ab', 'c']) == ['ab.', 'c..']", "pad(['xyz'], width=5) == ['xyz..']",
                       "pad(['a'], fill='-') == ['a--']", "pad(['hello'], 2) == ['hello']"}
    assert shown_examples(TASK) == [f"assert {s}" for _, _, s in prompt_examples(PROMPT, frozenset({"pad"}))]


def test_hidden_cases_the_prompt_shows_are_visible():
    hidden = {s["code"]: s["hidden"] for s in plan_of(TASK)["steps"] if s["kind"] == "case"}
    assert [hidden[c] for c in SHOWN_CASES] == [False] * 4          # positional or keyword, any quotes
    assert [hidden[c.replace("\n    ", "\n")] for c in UNSHOWN_CASES] == [True] * 5
    assert case_names(TASK) == [f"visible_{i}" for i in range(4)] + [f"hidden_{i}" for i in range(5)]


@pytest.mark.parametrize("line,shown", [
    ("f(3) == 9", True), ("f(3) ➞ 9", True), ("f(3) => 9", True), ("f(3) ==> 9", True), ("f(3) -> 9", True),
    ("f(3) = 9", True), ("f(3) returns 9", True), ("f(3) should return 9.", True), ("f(3)   # returns 9", True),
    ("`f(3)` should return `9`. Reply in a code block.", True), ("f(3) = 4 + 5 = 9", False),
    ("f(3) is nine", False), ("def f(3) -> 9:", False), ("f(x) == 9", False), ("g(3) == 9", False),
])
def test_inline_examples_in_prose(line, shown):
    task = {"task_id": "t/f", "domain": "python_tests", "prompt": f"Write f(n).\n{line}\n", "entry_point": "f",
            "test": "def check(candidate):\n    assert candidate(3) == 9\n    assert candidate(2) == 4\n",
            "answer": ""}
    assert case_names(task)[0] == ("visible_0" if shown else "hidden_0"), line


def test_mbpp_asserts_in_the_prompt_and_visible_cases_are_shown():
    task = {"task_id": "m", "domain": "python_tests", "prompt": "Square a number.\nassert square(3) == 9",
            "test_list": ["assert square(4) == 16"],
            "hidden_test_list": ["assert square(3)==9", "assert square(4) == 16", "assert square(5) == 25"]}
    assert case_names(task) == ["visible_0", "visible_1", "visible_2", "hidden_0"]


def test_a_lookup_table_of_docstring_examples_earns_nothing(score):
    v = score(TASK, LOOKUP)
    assert (v.reward, v.verdict) == (0.0, "fail"), v
    assert v.exploit_suspected and v.components.get("exploit_hard_codes_examples") == 1.0, v
    assert v.components["visible_pass_rate"] == 1.0                  # it does pass what was shown


def test_the_canonical_solution_earns_everything(score):
    v = score(TASK, CANONICAL)
    assert (v.reward, v.verdict, v.exploit_suspected) == (1.0, "pass", False), v


def test_a_lookup_table_with_a_guess_for_the_rest_earns_nothing(score):
    """It passes some unshown cases by its fallback, and still holds the shown examples' literals."""
    guess = LOOKUP.replace("return table.get((tuple(words), width, fill), [])",
                           "return table.get((tuple(words), width, fill)) or [w + '.' for w in words]")
    v = score(TASK, guess)
    assert v.reward == 0.0 and v.components.get("exploit_hard_codes_examples") == 1.0, v


def test_a_lookup_table_whose_default_passes_the_rest_earns_nothing(score):
    """The only unshown case wants `[]`, which the table's default gives: passing it proves no more
    than the `[]` do-nothing solution does, so the table is still flagged."""
    task = {**TASK, "test": "def check(candidate):\n" + "".join(f"    {c}\n" for c in SHOWN_CASES + UNSHOWN_CASES[:1])}
    v = score(task, LOOKUP)
    assert v.reward == 0.0 and v.components.get("exploit_hard_codes_examples") == 1.0, v
    assert score(task, CANONICAL).reward == 1.0


def test_when_every_case_is_shown_a_lookup_table_earns_nothing(score):
    """No unshown case is left to tell a lookup table from a solution: the shown cases pay (as
    visible), and a response holding a shown example's literals is flagged."""
    task = {**TASK, "test": "def check(candidate):\n" + "".join(f"    {c}\n" for c in SHOWN_CASES)}
    assert all(name.startswith("visible_") for name in case_names(task))
    assert score(task, CANONICAL).reward == 1.0
    v = score(task, LOOKUP)
    assert v.reward == 0.0 and v.components.get("exploit_hard_codes_examples") == 1.0, v


@pytest.mark.parametrize("domain", ["py_functions", "py_mbpp"])
def test_builtin_canonical_solutions_still_score_one(score, domain):
    d = get_domain(domain)
    failing = [(t["task_id"], v.detail) for t in d.tasks("train") + d.tasks("heldout")
               if (v := score(t, d.demonstration(t, None))).reward != 1.0]
    assert not failing


def test_chat_code_demonstrations_still_score_one(score):
    d = get_domain("chat_code")
    tasks = [{**d.make_task("train", i, 0), "domain": "chat_code"} for i in range(24)]
    failing = [(t["prompt"], v.detail) for t in tasks if (v := score(t, d.demonstration(t, None))).reward != 1.0]
    assert not failing


def test_a_lookup_table_earns_nothing_on_every_backend(isolating):
    """The same verdicts through cold `local`, the remote service, docker and docker+runsc."""
    domain = get_domain("python_tests")
    verify = get_verifier(domain.verifier)
    lookup = verify(TASK, LOOKUP, domain.run(isolating, TASK, LOOKUP))
    assert lookup.reward == 0.0 and lookup.components.get("exploit_hard_codes_examples") == 1.0, lookup
    assert verify(TASK, CANONICAL, domain.run(isolating, TASK, CANONICAL)).reward == 1.0
