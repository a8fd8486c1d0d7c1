"""The chat domains (chat_arith, chat_format, chat_code): tasks are seeded and chat-phrased, the
reference answer scores 1 through the domain's real verifier (and sandbox), a wrong one 0."""
import json
import random

import pytest

from flywheel.domains.registry import get_domain
from flywheel.families.chat.format_rules import check, words

CHAT = ("chat_arith", "chat_format", "chat_code")


def tasks(name, count):
    return [get_domain(name).make_task(split, i, 0) for split in ("train", "heldout")
            for i in range(count)]


@pytest.mark.parametrize("name", CHAT)
def test_tasks_are_seeded_and_chat_phrased(name):
    d = get_domain(name)
    assert d.make_task("train", 3, 7) == d.make_task("train", 3, 7)
    drawn = tasks(name, 20)
    assert len({t["prompt"] for t in drawn}) >= 30  # varied, not one template
    assert all(t["prompt"].rstrip().endswith((".", "?")) and not d.validate_task(t) for t in drawn)


def test_arithmetic_reference_scores_one_and_wrong_zero(score):
    for task in tasks("chat_arith", 25):
        assert score(task, task["answer"]).reward == 1.0
        assert score(task, f"Let me think. The answer is {task['answer']}.").reward == 1.0
        assert score(task, str(int(task["answer"]) + 1)).reward == 0.0
        assert task["answer"] not in task["prompt"].replace("?", " ").replace(".", " ").split()


def _wrong_format(task) -> str:
    """The reference broken for its first rule: one word, key, line or repeat too many or few."""
    ref, rule = task["answer"], task["rules"][0]
    return {"word_count": lambda: ref.rstrip(".") + " today.",
            "json_keys": lambda: json.dumps(dict(list(json.loads(ref).items())[1:])),
            "bullet_lines": lambda: "\n".join(ref.splitlines()[:-1]),
            "lowercase": lambda: ref.capitalize(),
            "repeated": lambda: ref + ", " + rule["word"],
            "one_of": lambda: {"yes": "no", "no": "yes"}.get(ref, "spaceship"),
            "max_words": lambda: ref + " and" * rule["n"]}[rule["rule"]]()


def test_format_reference_scores_one_and_wrong_zero(score):
    seen = set()
    for task in tasks("chat_format", 40):
        seen.add(task["rules"][0]["rule"])
        assert score(task, task["answer"]).reward == 1.0, task
        assert score(task, _wrong_format(task)).reward == 0.0, task
    assert seen == {"word_count", "json_keys", "bullet_lines", "lowercase", "repeated", "one_of",
                    "max_words"}


def test_format_rules_read_what_a_chat_model_writes():
    assert words("Don't stop: well-known rivers, 3 of them.") == ["Don't", "stop", "well-known",
                                                                   "rivers", "3", "of", "them"]
    assert check({"rule": "json_keys", "keys": ["a", "b"]}, 'Sure!\n```json\n{"b": "x", "a": "y"}\n```')
    assert not check({"rule": "json_keys", "keys": ["a", "b"]}, '{"a": "y", "b": ""}')
    assert check({"rule": "bullet_lines", "n": 2, "prefix": "- "}, "- red\n\n- blue\n")
    assert not check({"rule": "bullet_lines", "n": 2, "prefix": "- "}, "- red\n- red")
    assert check({"rule": "one_of", "options": ["yes"]}, " Yes.") and \
        not check({"rule": "one_of", "options": ["yes"]}, "Yes, it is.")
    with pytest.raises(ValueError, match="unknown format rule 'rhyme'; known: word_count"):
        check({"rule": "rhyme"}, "x")


def test_code_reference_scores_one_and_wrong_zero(score):
    rng = random.Random(0)
    drawn = tasks("chat_code", 12)
    assert len({t["test_list"][0].split("(")[0] for t in drawn}) >= 8  # many function families
    for task in drawn:
        d = get_domain("chat_code")
        assert score(task, d.demonstration(task, rng)).reward == 1.0, task
        body = task["code"].split("return ", 1)[1].strip()
        wrong = task["code"].replace(f"return {body}", f"return repr({body})")
        assert score(task, f"```python\n{wrong}```").reward == 0.0, task
