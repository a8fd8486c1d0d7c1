"""Shared fixtures: one real sandbox backend per test module, and a scorer that runs a domain's
program in it with the program's own limits, then the domain's verifier (no mocks)."""

import pytest

from flywheel.domains.registry import get_domain
from flywheel.sandbox import get_backend
from flywheel.verifiers import get_verifier


@pytest.fixture(scope="module")
def sandbox():
    with get_backend("local") as backend:
        yield backend


@pytest.fixture(scope="module")
def score(sandbox):
    """score(task, response) -> Verdict, through the task's domain, its sandbox and its verifier."""
    def score(task, response):
        domain = get_domain(task["domain"])
        execution = domain.run(sandbox, task, response) if domain.uses_sandbox else None
        return get_verifier(domain.verifier)(task, response, execution)
    return score
