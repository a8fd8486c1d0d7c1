"""Domain.answer_key: equal keys for the same answer in any surface form, different keys for
different answers, agreement with each domain's verifier, and totality on hostile text."""

import random
import time

import pytest

from flywheel.domains.domain import KEY_CHARS
from flywheel.domains.registry import all_domains, get_domain


def key(domain: str, response: str, task: dict | None = None):
    return get_domain(domain).answer_key(task or {"answer": ""}, response)


@pytest.mark.parametrize("domain,same,other", [
    ("add", ["75", " 75 ", "75.0", "7.5e1", "+75", "75.000"], ["76", "7.5", "-75"]),
    ("reverse", ["dcba", " dcba\n"], ["abcd", "DCBA", "dc ba"]),
    ("digitsum", ["0813", " 0813 "], ["813", "0814"]),
    ("interval", ["7", "007", " 7\n"], ["8", "70"]),
    ("pyexpr", ["3*4+2", "10+4", "(7)*2", "28//2", "15-1  # fourteen"], ["7/2*4", "15-0", "2*7.0"]),
    ("chat_arith", ["41", "So 14 + 27 = 41.", "The answer is 41", "#### 41", "\\boxed{41}", "Answer: 41.0"],
     ["42", "\\boxed{41} or \\boxed{42}", "41.5"]),
    ("math_fractions", ["\\boxed{1/2}", "\\boxed{\\frac{1}{2}}", "Answer: 0.5", "\\boxed{2/4}", "\\boxed{\\dfrac{2}{4}}",
                        "#### 0.50", "\\boxed{1/2} so \\boxed{0.5}"], ["\\boxed{1/3}", "\\boxed{0.51}", "\\boxed{2}"]),
    ("math_derivative", ["\\boxed{9x^2 - 2}", "\\boxed{-2 + 9x^{2}}", "Answer: 3x \\cdot 3x - 2", "\\boxed{(3x-1)(3x+1) - 1}"],
     ["\\boxed{9x^2 + 2}", "\\boxed{9y^2 - 2}", "\\boxed{9x^2 - 2.001}"]),
    ("math_quadratic", ["\\boxed{2, 3}", "\\boxed{3, 2}", "Answer: x = 2, 3", "\\boxed{2,3.0}"],
     ["\\boxed{2}", "\\boxed{2, 3, 4}", "\\boxed{-2, 3}"]),
    ("math", ["\\boxed{\\sqrt{2}/2}", "\\boxed{1/\\sqrt{2}}", "\\boxed{\\frac{\\sqrt{2}}{2}}"], ["\\boxed{\\sqrt{2}}", "\\boxed{0.7071}"]),
    ("math", ["\\boxed{\\sin(x)^2 + \\cos(x)^2}", "\\boxed{1}"], ["\\boxed{sin(x)}"]),
    ("rg_basic_arithmetic", ["<answer>42</answer>", "<answer> 42 </answer>", "think... <answer>42</answer>", " 42 "],
     ["<answer>43</answer>", "<answer>42</answer><answer>43</answer>"]),
    ("rg_word_sorting", ["<answer>a, b,  c</answer>", "<answer>a,\nb, c</answer>"], ["<answer>a,b,c</answer>"]),
])
def test_same_answer_same_key_other_answer_other_key(domain, same, other):
    keys = {key(domain, r) for r in same}
    assert len(keys) == 1 and None not in keys, (domain, {r: key(domain, r) for r in same})
    (k,) = keys
    for r in other:
        assert key(domain, r) != k, (domain, r)


def test_ordered_lists_keep_their_order():
    ordered = {"answer": "1, 2", "ordered": True}
    assert key("math", "\\boxed{1, 2}", ordered) != key("math", "\\boxed{2, 1}", ordered)
    assert key("math", "\\boxed{1, 2}") == key("math", "\\boxed{2, 1}")


def test_unreadable_answers_have_no_key():
    assert key("add", "seventy-five") is None and key("add", "") is None
    assert key("interval", "7.0") is None and key("digitsum", "08a") is None
    assert key("pyexpr", "14") is None                    # python_output needs an operator
    assert key("pyexpr", "print(14)") is None and key("pyexpr", "1/0") is None
    assert key("math", "I don't know") is None and key("math", "\\boxed{\\infty}") is None
    assert key("math", "\\boxed{1/3} or \\boxed{1/2}") is None  # hedging: the verifier fails it
    assert key("rg_basic_arithmetic", "<answer>1</answer> <answer>2</answer>") is None


CODE_LIKE = ["python_tests", "chat_code", "fix_function", "repo", "repo_bugs", "sql_shop", "shell_files",
             "chat_format", "extract_contact"]


@pytest.mark.parametrize("domain", CODE_LIKE)
def test_code_and_free_text_domains_have_no_key(domain):
    for response in ["def f(x):\n    return x + 1\n", "42", "\\boxed{42}", "SELECT 1;"]:
        assert key(domain, response) is None


KEYED = ["add", "reverse", "digitsum", "interval", "pyexpr", "chat_arith", "math_linear",
         "math_fractions", "math_derivative", "math_quadratic", "math_discount"]


def _variants(domain: str, task: dict, correct: str, rng: random.Random) -> list[str]:
    """Responses to `task`: the correct one, the same answer in other words, and wrong ones."""
    answer = task["answer"]
    out = [correct, f"  {correct}\n"]
    if domain in ("chat_arith",) or get_domain(domain).verifier == "math_answer":
        n = int(answer) if domain == "chat_arith" else None
        out += [f"Let me think. Answer: {answer}", f"\\boxed{{{answer}}}", f"#### {answer}"]
        if n is not None:
            out += [str(n + 1), f"\\boxed{{{n - 1}}}", f"{n}.0", f"\\boxed{{{n}}} or \\boxed{{{n + 2}}}"]
        else:
            out += [f"\\boxed{{{answer} + 1}}", f"\\boxed{{2*({answer})}}", f"\\boxed{{({answer})/3 + 1}}",
                    f"\\boxed{{\\frac{{2({answer})}}{{2}}}}", f"\\boxed{{{answer}}} or \\boxed{{{answer} + 1}}"]
    elif domain == "add":
        out += [f"{int(answer)}.0", str(int(answer) + 1), str(int(answer) - rng.randint(1, 9)), "x"]
    elif domain == "reverse":
        out += [answer[::-1], answer.upper(), answer + "a"]
    elif domain == "digitsum":
        n, s = map(int, answer.split())
        out += ["1" * n, "9" * n, "0" + correct, correct[1:] or "5"]
    elif domain == "interval":
        low, high = map(int, answer.split())
        out += [f"00{correct}", str(low), str(high), str(high + 1), str(max(low - 1, 0))]
    elif domain == "pyexpr":
        n = int(answer)
        out += [f"{n}+0", f"{n + 1}-1", f"{n}*1+1", f"{n}/1", str(n), f"{n}-1"]
    return out


@pytest.mark.parametrize("domain", KEYED)
def test_keys_agree_with_the_verifier(domain, score):
    """Among responses to one task, a response's key equals a correct response's key exactly
    when the verifier passes it (pyexpr: the sandbox runs each)."""
    d, rng = get_domain(domain), random.Random(0)
    rounds = 12 if d.uses_sandbox else 40
    checked = 0
    for index in range(rounds):
        task = d.make_task("train" if index % 3 else "heldout", index, seed=7)
        correct = d.demonstration(task, rng)
        want = d.answer_key(task, correct)
        assert want is not None and score(task, correct).verdict == "pass", (task, correct)
        for response in _variants(domain, task, correct, rng):
            passes = score(task, response).verdict == "pass"
            got = d.answer_key(task, response)
            if domain in ("digitsum", "interval"):  # many right answers: each keeps its own key
                assert got is None or not passes or got == response.strip().lstrip("0") or got == response.strip()
                continue
            assert (got == want) == passes, (domain, task["answer"], response, got, want, passes)
            checked += 1
    assert checked or domain in ("digitsum", "interval")


@pytest.mark.parametrize("domain", ["math_discount", "math_linear", "chat_arith"])
def test_equal_keys_mean_equal_verdicts(domain, score):
    """What maj@N relies on: responses that share a key get the same verdict (random answers)."""
    d, rng = get_domain(domain), random.Random(1)
    for index in range(30):
        task = d.make_task("train", index, seed=3)
        verdicts = {}
        for _ in range(12):
            value = rng.choice([task["answer"], f"{rng.randint(-20, 300)}", f"{rng.randint(1, 9)}/{rng.randint(1, 9)}"])
            response = rng.choice(["\\boxed{%s}", "Answer: %s", "so it is %s"]) % value
            k = d.answer_key(task, response)
            if k is not None:
                verdicts.setdefault(k, set()).add(score(task, response).verdict)
        assert all(len(v) == 1 for v in verdicts.values()), (task, verdicts)


HOSTILE = ["(" * 10_000, "(" * 10_000 + "1" + ")" * 10_000, "7" * 1_000_000, "\ud800\udfff\ud800", "\x00" * 1000,
           "\\boxed{" * 50_000, "\\boxed{" + "(" * 10_000 + "}", "<answer>" * 100_000,
           "<answer>" + "\ud800" * 500 + "</answer>", "Answer: " + "9^" * 100_000 + "9",
           "\\boxed{exp(exp(exp(exp(100))))}", "\\boxed{9^{9^{9^{9}}}}", "-" * 500_000 + "1",
           "2**2**2**2**2**2", "10**4000*10**4000", "1<<10**9", "\\boxed{" + "x+" * 140 + "x}",
           " ".join(f"\\boxed{{{i}}}" for i in range(20_000)), "answer: " * 100_000]


@pytest.mark.parametrize("domain", KEYED + ["rg_basic_arithmetic", "rg_word_sorting", "math"])
def test_hostile_responses_are_read_quickly_into_a_short_key_or_none(domain):
    d = get_domain(domain)
    task = d.make_task("train", 0, seed=1) if domain != "math" else {"answer": "1/2"}
    for response in HOSTILE:
        start = time.monotonic()
        k = d.answer_key(task, response)
        took = time.monotonic() - start
        assert k is None or (isinstance(k, str) and len(k) <= KEY_CHARS), (domain, response[:40], k)
        if k is not None:
            k.encode("utf-8")  # a table can store it: no lone surrogates
        assert took < 2.0, (domain, response[:40], took)


def test_every_domain_answers_the_question_without_raising():
    for name in all_domains():
        if name.startswith("rg_") and name not in ("rg_basic_arithmetic", "rg_word_sorting"):
            continue
        assert get_domain(name).answer_key({"answer": "1", "task_id": "t"}, "\\boxed{1} <answer>1</answer>") \
            in (None, "1", "\\boxed{1} <answer>1</answer>")
