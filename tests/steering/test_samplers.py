"""Samplers (steering/samplers.py): classes from history, quotas per class, reproducible choice."""

from collections import Counter

import pytest

from flywheel.steering.history import TaskStats
from flywheel.steering.samplers import SAMPLERS, Candidate, Policy, priority, select


def stats(task_id, passes, scored=8, solved_visits=0, pattern=None, env_failed=False):
    return TaskStats("d", task_id, visits=1 + solved_visits, attempts=8, scored=scored,
                     passes=passes, last_iteration=0,
                     last_pass_rate=passes / scored if scored else None,
                     solved_visits=solved_visits, env_failed_visits=int(env_failed),
                     last_env_failed=env_failed, pattern=pattern)


def test_curriculum_classes():
    curriculum, policy = SAMPLERS.get("curriculum")(), Policy(error_share=0.2)
    assert curriculum.classify("t", None, policy).klass == "unseen"
    assert curriculum.classify("t", stats("t", 4), policy).klass == "band"
    solved = curriculum.classify("t", stats("t", 8, solved_visits=2), policy)
    assert (solved.klass, solved.weight) == ("outside", pytest.approx(0.25 ** 2))
    assert curriculum.classify("t", stats("t", 0), policy).klass == "outside"  # no pattern
    error = curriculum.classify("t", stats("t", 0, pattern="fail|model"), policy)
    assert (error.klass, error.pattern) == ("error", "fail|model")
    assert curriculum.classify("t", stats("t", 0, scored=0, env_failed=True), policy).klass == "retry"


def test_environment_retries_are_bounded():
    policy = Policy(env_retries=1)
    lost_twice = TaskStats("d", "t", visits=2, attempts=16, scored=0, passes=0, last_iteration=1,
                           env_failed_visits=2, last_env_failed=True)
    assert SAMPLERS.get("uniform")().classify("t", lost_twice, policy).klass == "any"


def test_the_error_set_is_fed_back_only_when_asked():
    failing = stats("t", 0, pattern="fail|model")
    assert SAMPLERS.get("uniform")().classify("t", failing, Policy()).klass == "any"
    assert SAMPLERS.get("uniform")().classify("t", failing, Policy(error_share=0.1)).klass == "error"


def test_select_fills_class_quotas_then_leftovers_with_the_error_set_last():
    cands = ([Candidate(f"b{i}", "band") for i in range(3)]
             + [Candidate(f"u{i}", "unseen") for i in range(20)]
             + [Candidate(f"e{i}", "error", 1.0, "p1" if i < 10 else "p2") for i in range(20)]
             + [Candidate("r0", "retry")])
    quota, policy = 10, Policy(explore=0.3, error_share=0.2)
    chosen = select(cands, quota, SAMPLERS.get("curriculum")().class_quotas(quota, policy), 0, 1)
    got = Counter(c.klass for c in chosen)
    # retry first (1); error 2 (one per pattern); band 3 (all there are); unseen: 3 + the rest
    assert got == {"retry": 1, "error": 2, "band": 3, "unseen": 4}
    assert {c.pattern for c in chosen if c.klass == "error"} == {"p1", "p2"}


def test_selection_depends_only_on_seed_iteration_and_candidates():
    cands = [Candidate(f"t{i}", "any") for i in range(50)]
    a = select(cands, 10, {"any": 10}, seed=1, iteration=2)
    assert a == select(list(reversed(cands)), 10, {"any": 10}, seed=1, iteration=2)
    assert a != select(cands, 10, {"any": 10}, seed=1, iteration=3)


def test_weights_decide_how_often_a_task_is_taken():
    heavy = sum(priority(0, it, "heavy", 4.0) < priority(0, it, "light", 1.0) for it in range(2000))
    assert 0.75 < heavy / 2000 < 0.85  # P = 4 / (4 + 1)
    assert priority(0, 0, "t", 0.0) == float("inf")


@pytest.mark.parametrize("field, value, words", [
    ("band", "0.9,0.1", "LOW <= HIGH"), ("band", "x", "LOW,HIGH"), ("explore", 1.5, "explore"),
    ("error_share", 0.9, "more than the whole quota")])
def test_bad_policy_settings_name_the_setting(field, value, words):
    from dataclasses import replace

    from flywheel.settings.config import SteeringSettings
    settings = replace(SteeringSettings(), **{field: value})
    if field == "error_share":
        settings = replace(settings, explore=0.5)
    with pytest.raises(ValueError, match=words):
        Policy.from_settings(settings)
