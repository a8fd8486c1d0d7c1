"""Built-in domains: seeded, split-disjoint, and their demonstrations pass their own verifier."""

import random

import pytest

from flywheel.domains.domain import Domain
from flywheel.domains.registry import DEFAULT_DOMAINS, all_domains, get_domain, register_domain
from flywheel.sandbox import get_backend
from flywheel.verifiers import get_verifier


def test_registry_has_the_defaults_and_rejects_unknown_names():
    assert set(DEFAULT_DOMAINS) <= set(all_domains())
    with pytest.raises(KeyError, match="unknown domain 'nope'"):
        get_domain("nope")


def test_duplicate_registration_is_refused():
    get_domain("add")  # registered first, whichever test this worker ran before
    with pytest.raises(ValueError, match="already registered"):
        @register_domain
        class Again(Domain):
            name = "add"


@pytest.mark.parametrize("name", DEFAULT_DOMAINS)
def test_tasks_are_seeded_and_splits_disjoint(name):
    d = get_domain(name)
    assert d.make_task("train", 3, seed=7) == d.make_task("train", 3, seed=7)
    assert d.make_task("train", 3, seed=7) != d.make_task("train", 3, seed=8)
    train = {d.make_task("train", i, 0)["prompt"] for i in range(300)}
    heldout = {d.make_task("heldout", i, 0)["prompt"] for i in range(100)}
    assert not train & heldout


@pytest.mark.parametrize("name", DEFAULT_DOMAINS)
def test_demonstrations_pass_and_wrong_answers_fail(name):
    d, rng = get_domain(name), random.Random(0)
    verifier = get_verifier(d.verifier)
    backend = get_backend("local") if d.uses_sandbox else None

    def score(task, response):
        execution = None
        if d.uses_sandbox:
            execution = backend.run(d.request(task, response))
        return verifier(task, response, execution)

    for i in range(10):
        task = d.make_task("train", i, 0)
        assert score(task, d.demonstration(task, rng)).verdict == "pass", task
        assert score(task, "9999x").verdict == "fail"
    if backend:
        backend.close()
