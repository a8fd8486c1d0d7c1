"""reasoning_gym: every dataset is a domain scored by its own score_answer; unsafe answers never
reach the scorers that eval them."""

import random
import subprocess
import sys

import pytest

from flywheel.domains.registry import all_domains, get_domain
from flywheel.families.reasoning_gym.rg import DATASETS
from flywheel.verifiers import get_verifier

reasoning_gym = pytest.importorskip("reasoning_gym")
V = get_verifier("reasoning_gym")
# reasoning-gym's own answers do not score 1.0 for these (the answer field is not a solution)
NOT_SELF_SCORING = {"boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour"}


def test_every_dataset_but_composite_is_a_domain():
    from reasoning_gym.factory import DATASETS as FACTORY
    assert set(DATASETS) == set(FACTORY) - {"composite"}
    assert {f"rg_{n}" for n in DATASETS} <= set(all_domains())


def test_importing_the_registry_does_not_import_reasoning_gym():
    code = ("import sys; from flywheel.domains.registry import all_domains; n = len(all_domains()); "
            "print(n, 'reasoning_gym' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, imported = out.stdout.split()
    assert int(count) >= 100 and imported == "False"


@pytest.mark.slow
@pytest.mark.parametrize("name", DATASETS)
def test_each_dataset_scores_its_own_answer_and_rejects_junk(name):
    d, rng = get_domain(f"rg_{name}"), random.Random(0)
    task = d.make_task("train", 0, 0)
    assert task == d.make_task("train", 0, 0) and task["prompt"].endswith("</answer> tags.")
    if name not in NOT_SELF_SCORING:
        assert V(task, "Thinking...\n" + d.demonstration(task, rng)).verdict == "pass"
    assert V(task, "<answer>definitely not it 12345</answer>").verdict == "fail"
    assert V(task, "").reward < 1.0


def test_hacks_score_zero_and_never_run(tmp_path):
    marker = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {marker}')"
    for name in ["n_queens", "string_insertion", "countdown", "simple_integration", "puzzle24"]:
        task = get_domain(f"rg_{name}").make_task("train", 1, 0)
        v = V(task, f"<answer>{payload}</answer>")
        assert v.reward == 0.0 and v.exploit_suspected, name
    assert not marker.exists()
    tower = get_domain("rg_puzzle24").make_task("train", 1, 0)
    assert V(tower, "<answer>9**9**9**9</answer>").exploit_suspected
    assert V(tower, "<answer>9^(9^9)</answer>").exploit_suspected
    chain = get_domain("rg_chain_sum").make_task("train", 1, 0)
    hedge = V(chain, f"<answer>{chain['answer']}</answer> or <answer>0</answer>")
    assert hedge.reward == 0.0 and hedge.exploit_suspected
    junk = V(get_domain("rg_countdown").make_task("train", 1, 0), "<answer>%$#@!{</answer>")
    assert junk.reward == 0.0 and not junk.exploit_suspected      # refused, but not an exploit


def test_safe_answers_still_reach_the_scorers():
    countdown = get_domain("rg_countdown").make_task("train", 2, 0)
    assert V(countdown, f"<answer>{countdown['answer']}</answer>").verdict == "pass"
    integ = get_domain("rg_simple_integration").make_task("train", 2, 0)
    assert V(integ, f"<answer>{integ['answer']}</answer>").verdict == "pass"


def test_only_a_correct_answer_earns_reward():
    """reasoning-gym pays 0.01 for well-formed wrong answers in many datasets, and
    len(oracle)/len(answer) when the oracle is a substring of the answer: neither is reward."""
    task = get_domain("rg_gcd").make_task("train", 0, 0)
    oracle = task["answer"]
    spray = " ".join(str(i) for i in range(200))
    assert oracle in spray
    wrong = str(int(oracle) + 1)
    for response in (f"<answer>{spray}</answer>", f"<answer>{wrong}</answer>"):
        v = V(task, response)
        assert (v.reward, v.verdict) == (0.0, "fail"), (response[:40], v)
    assert V(task, f"<answer>{oracle}</answer>").reward == 1.0


def test_a_prefix_of_the_probability_is_not_the_probability():
    """coin_flip's scorer pays the common prefix of the digits: "0" was right for any p < 1."""
    domain = get_domain("rg_coin_flip")
    for index in range(5):
        task = domain.make_task("train", index, 0)
        p = float(task["answer"])
        assert 0 < p < 1
        for wrong in ("0", "0.0", task["answer"][:3]):
            assert V(task, f"<answer>{wrong}</answer>").reward == 0.0, (task["answer"], wrong)
        assert V(task, f"<answer>{task['answer']}</answer>").reward == 1.0
        assert V(task, f"<answer>{p:.6f}</answer>").reward == 1.0  # rounded, still right


def test_the_code_scan_is_linear_on_long_answers():
    from flywheel.families.reasoning_gym.verifier import _CODE_LIKE
    assert _CODE_LIKE.search("a" * 200_000) is None   # was quadratic: seconds for 10 KB
    assert _CODE_LIKE.search("x" * 100_000 + " os.system('id')")


def test_a_task_whose_entry_is_rebuilt_differently_is_not_scored():
    """A generator that depends on the hash seed builds another task for the same index in
    another process: the verifier refuses to score against it (an error, never a reward)."""
    task = get_domain("rg_gcd").make_task("train", 0, seed=0)
    other = get_domain("rg_gcd").make_task("train", 1, seed=0)
    while other["prompt"] == task["prompt"]:
        other = get_domain("rg_gcd").make_task("train", int(other["rg_index"]) + 1, seed=0)
    shown_another = {**task, "prompt": other["prompt"]}
    verdict = get_verifier("reasoning_gym")(shown_another, f"<answer>{task['answer']}</answer>")
    assert verdict.verdict == "error" and verdict.reward == 0.0
    assert get_verifier("reasoning_gym")(task, f"<answer>{task['answer']}</answer>").verdict == "pass"


@pytest.mark.parametrize("name", ["polynomial_multiplication",  # slow: the same rule, a second generator
                                  pytest.param("isomorphic_strings", marks=pytest.mark.slow)])
def test_a_hash_dependent_generator_gives_every_process_the_same_task(name):
    """Beam workers and the verifier's bounded worker run under other hash seeds than the process
    that made the task: they must rebuild the same entry."""
    import os
    code = (f"from flywheel.domains.registry import get_domain; "
            f"print(repr(get_domain('rg_{name}').make_task('train', 3, 0)['prompt']))")
    seen = set()
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        seen.add(done.stdout)
    assert len(seen) == 1
