"""Property-based fuzzing of every verifier kind through verify_attempt and a bounded worker:
random and hostile responses (and, for kinds that read the sandbox's report, hostile sandbox
output) always come back as a verdict within the deadline, and no exception escapes.

Neither a response nor what its code printed ever makes an `error` verdict: what the model wrote,
or made its program print, that a verifier cannot handle is a model failure (the blame probe
never reuses the attempt's execution: transforms/verify.py). For the sandbox kinds the
execution record is fuzzed too.
"""

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from flywheel.domains.registry import get_domain
from flywheel.sandbox import ExecResult
from flywheel.transforms.expand import expand_task
from flywheel.transforms.verify import verify_attempt
from flywheel.verifiers.bounded import BoundedVerifier, Bounds

DEADLINE_S = 3
_WORKER = {}


def worker() -> BoundedVerifier:
    if "w" not in _WORKER:
        _WORKER["w"] = BoundedVerifier(Bounds(deadline_s=DEADLINE_S, memory_mb=512))
    return _WORKER["w"]


@pytest.fixture(scope="module", autouse=True)
def close_worker():
    yield
    if "w" in _WORKER:
        _WORKER.pop("w").close()


FRAGMENTS = ["\\boxed{", "}", "{", "(", ")", "[", "]", "**", "^", "9", "e", "x", "!", "\\frac{",
             "<answer>", "</answer>", "```json\n", "```", '{"a":', "1e999", "-", ",", "\\sqrt{",
             "exp(", "answer: ", "####", "\x00", "\ud800", "Q _ ", "\n", "__import__", "9" * 400]
hostile = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join) | \
    st.tuples(st.sampled_from(FRAGMENTS), st.integers(1, 20_000)).map(lambda t: t[0] * t[1])
responses = st.text(max_size=300) | hostile

# Slow: reasoning-gym verifiers that hostile responses drive to the deadline, each example a
# worker kill and restart (rg_n_queens 250 s of test time on a loaded machine); rg_chain_sum keeps
# the reasoning-gym kind in the quick tier.
PLAIN_KINDS = ["add", "digitsum", "interval", "reverse", "extract_invoice", "math_linear",
               "rg_chain_sum", *(pytest.param(kind, marks=pytest.mark.slow)
                                 for kind in ("rg_polynomial_multiplication", "rg_n_queens"))]
SANDBOX_KINDS = {"py_functions": "FLYWHEEL-PYTESTS ", "sql_shop": "FLYWHEEL-SQL ",
                 "shell_files": "FLYWHEEL-SHELL ", "pyexpr": "", "fix_function": ""}


def attempt(domain: str, response: str, index: int, execution=None):
    task = get_domain(domain).make_task("train", index, 0)
    one, = expand_task(task, run_id="fuzz", iteration=0, policy_version=0, seed=0, n_samples=1,
                       temperature=0.0, mode="eval")
    return one.replace(response=response, execution=execution)


def timed_verify(a):
    start = time.monotonic()
    out, error = verify_attempt(a, worker())
    # the verification's deadline, then at most one worker restart and one blank probe
    assert time.monotonic() - start < 2 * DEADLINE_S + 60
    return out, error


@pytest.mark.parametrize("domain", PLAIN_KINDS)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(response=responses, index=st.integers(0, 3))
def test_any_response_gets_a_verdict_and_is_never_an_error(domain, response, index):
    pytest.importorskip("reasoning_gym") if domain.startswith("rg_") else None
    out, error = timed_verify(attempt(domain, response, index))
    assert out.verdict in ("pass", "fail") and out.failure is None, out.verdict_detail
    assert error is None or error["kind"] == "model"


reports = st.one_of(
    st.text(max_size=200),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                 lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                 max_leaves=20).map(json.dumps),
    st.sampled_from(['{"cases": [{"name": 1}]}', '{"results": [{"rows": "x"}]}',
                     '{"variants": [{"files": []}]}', "[" * 5000, '{"results": ' + "9" * 5000 + "}",
                     "[" * 5000 + "]" * 5000, '{"cases": ' + "[" * 900 + "]" * 900 + "}"]))


@pytest.mark.parametrize("domain", sorted(SANDBOX_KINDS))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(response=responses, report=reports, exit_code=st.sampled_from([0, 1, -9, None]),
       kill=st.sampled_from([None, "signal", "memory", "wall"]))
def test_any_sandbox_output_gets_a_verdict_and_no_exception_escapes(domain, response, report,
                                                                    exit_code, kill):
    stdout = SANDBOX_KINDS[domain] + report + "\n"
    execution = ExecResult(exit_code, stdout, "", kill == "wall", False, kill, 1.0, 1.0, "local")
    out, error = timed_verify(attempt(domain, response, 0, execution))
    assert out.verdict in ("pass", "fail") and out.failure is None, out.verdict_detail
    assert error is None or error["kind"] == "model"
    if error is not None:
        assert out.reward_raw == 0.0
