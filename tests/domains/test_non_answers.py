"""Responses that do not do the task earn nothing, in every registered domain (issue 10, class 6).

A sweep, not a list of known holes: each domain's tasks against answers that say nothing (empty,
a refusal, empty tags, code blocks that do nothing, the prompt echoed back), through the domain's
real sandbox program and verifier."""

import random

import pytest

from flywheel.domains.registry import all_domains, get_domain
from flywheel.verifiers import get_verifier

NON_ANSWERS = ["", "I don't know.", "<answer></answer>", "<answer>I cannot answer this.</answer>",
               "```python\npass\n```", "```python\nraise SystemExit(0)\n```",
               "```python\nimport os; os._exit(0)\n```", "```sql\nSELECT 1\n```",
               "```bash\ntrue\n```", "<answer>0</answer>"]


def tasks_of(domain, count=1):
    try:
        return [domain.make_task("train", i, 0) for i in range(count)]
    except Exception:  # a domain of the user's own files: no built-in tasks
        return []


# Slow, with the whole suite only: the render domains (each answer drawn in the render
# environment: 10-35 s of test time per domain; the quick tier scores render answers in
# tests/families/render) and the reasoning-gym domains whose puzzles take seconds to make or score
# (futoshiki 54 s). The other reasoning-gym domains keep both kinds in the quick tier.
SLOW = {"scene", "chart_edit", "chart_to_code", "rg_futoshiki", "rg_knight_swap", "rg_isomorphic_strings",
        "rg_word_ladder", "rg_zebra_puzzles", "rg_list_functions", "rg_ransom_note",
        "rg_polynomial_multiplication"}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name
                                  for name in sorted(all_domains())])
def test_non_answers_earn_nothing(name, sandbox, request):
    domain, rng = get_domain(name), random.Random(0)
    if domain.verifier == "render":  # its harness draws with the `render` environment's matplotlib
        request.getfixturevalue("render_env")
    verifier = get_verifier(domain.verifier)
    for task in tasks_of(domain):
        right = {domain.demonstration(task, rng).strip(), str(task.get("answer", "")).strip()}
        for response in [*NON_ANSWERS, task["prompt"]]:
            inner = response.replace("<answer>", "").replace("</answer>", "").strip()
            if response.strip() in right or inner in right or f"<answer>{inner}</answer>" in right:
                continue  # it happens to be this task's answer
            execution = domain.run(sandbox, task, response) if domain.uses_sandbox else None
            verdict = verifier(task, response, execution)
            assert verdict.reward == 0.0, (name, task["prompt"][-120:], response, verdict)
