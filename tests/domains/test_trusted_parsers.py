"""Every trusted parser of model-controlled text, fuzzed: what a model wrote, or what its code
printed, nested thousands deep, in long runs, as huge numbers or invalid Unicode, never raises
anything but the parser's own refusal and never takes more than linear time.

PARSERS is the inventory (README, threat model): the parsers that run in the pipeline's own
stages, where no deadline guards them (tool calls, request building, observations, harness
reports). Verifiers run in the bounded worker under a deadline; they are fuzzed through it in
tests/verifiers/test_fuzz_verifiers.py. The deadline assertion is hypothesis' own: a generous
bound per call (inputs here are up to the sandbox's 64 KB output cap), far above linear time and
far below what a quadratic pattern takes (about a minute at that size).
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from flywheel.domains.episodes import is_episodic
from flywheel.domains.tool_runner import cut_output
from flywheel.families.python.fix_function import body_shape, printed_values
from flywheel.families.builtins.pyexpr import arithmetic_shape
from flywheel.families.python.python_tests import REPORT_MARKER, solution_source
from flywheel.domains.registry import DOMAINS, get_domain
from flywheel.domains.report_channel import authenticate, harness_report
from flywheel.families.shell.shell_state import script_of
from flywheel.families.sql.sql_query import query_of
from flywheel.domains.tools import ToolCall, ToolCallError, parse_action, text_argument
from flywheel.families.math.formats import gsm8k_final, last_boxed
from flywheel.domains.untrusted_text import Unreadable, boxed, load_json, parse_python
from flywheel.sandbox import ExecResult

CAP = 65_536  # the sandbox's default output cap, and about MAX_ACTION_CHARS
DEADLINE = dt.timedelta(seconds=3)
FUZZ = settings(max_examples=60, deadline=DEADLINE, suppress_health_check=list(HealthCheck))

PREFIXES = ["", "<tool_call>", '<tool_call>{"name": "run_tests", "arguments": {"code": ',
            '<tool_call>{"name": "submit", "arguments": "', "```", "```json\n", "```python\n", "```sql\n",
            "```bash\n", REPORT_MARKER, "def f(x):\n    return ", "[1, 2, "]
OPENERS = ["[", "{\"a\": ", "(", "-", "not ", "a.", "f(", "[[", "\\frac{", "{", "\"", "\\",
           "\\boxed{", "#### "]
CHAINS = ["+x", ".b", "(x)", "[0]", " if x else x", " or x", "**x", " < x"]  # trees deep without brackets
RUNS = [" ", "\t", "\n", "9", "0", "```", "<tool_call>", "a", "\\u", "é", "\ud800", "\x00", "\uffff"]


def _nested(t):
    prefix, opener, n = t
    closer = {"[": "]", "(": ")", "{": "}", "f(": ")", "[[": "]]", "\\frac{": "}"}.get(opener, "")
    return prefix + opener * n + "1" + closer * (n // 2)


# sizes around the limits that matter: depth 100 (ours), ~1,000 (recursion), 3,000+ (the parser)
sizes = st.sampled_from([1, 100, 101, 1_000, 5_000, 20_000]) | st.integers(1, 20_000)
hostile = st.one_of(
    st.tuples(st.sampled_from(PREFIXES), st.sampled_from(OPENERS), sizes).map(_nested),
    st.tuples(st.sampled_from(PREFIXES), st.sampled_from(CHAINS), sizes).map(
        lambda t: t[0] + "x" + t[1] * t[2]),
    st.tuples(st.sampled_from(PREFIXES), st.sampled_from(RUNS), st.integers(1, CAP)).map(
        lambda t: (t[0] + t[1] * t[2])[:CAP]),
    st.tuples(st.sampled_from(PREFIXES), st.integers(1, 60_000)).map(lambda t: t[0] + "9" * t[1]),
    st.sampled_from(["1e999999", "-" + "9" * 5000, '{"a": 1e400}', "NaN", "[Infinity]", "\ud800\udc00",
                     '"\\ud800"', "[" * CAP]),
    # runs of whitespace after an opener: the shape that makes `opener\s*X\s*Y` patterns quadratic
    st.tuples(st.sampled_from(["<tool_call>", "```", "```python", "```sql", "```bash", "```json",
                               "answer:", "answer", "####", "#### a", REPORT_MARKER]),
              st.sampled_from([" ", "\t", " \t", "\n "]), st.sampled_from(["", "x", "\n", "```"])).map(
        lambda t: t[0] + (t[1] * CAP)[:CAP - 20] + t[2]),
    st.lists(st.sampled_from(PREFIXES + OPENERS + RUNS), max_size=60).map("".join),
    st.text(max_size=400),
)


def _task(domain: str) -> dict:
    task = get_domain(domain).make_task("train", 0, seed=0)
    return {**task, "domain": domain}


def _report_result(text: str) -> ExecResult:
    return ExecResult(0, text, "", False, False, None, 1.0, 1.0, "local")


def _python_tests_source(text: str) -> str:
    return solution_source(_task("py_functions"), text) + solution_source(_task("py_mbpp"), text)


def _each_tool_call(text: str) -> None:
    for name in sorted(DOMAINS.names()):
        domain = get_domain(name)
        if is_episodic(domain):
            try:
                parse_action(text, domain.tools, domain.plain_tool)
            except ToolCallError:
                pass


def _refusing(fn, *refusals):
    def call(text):
        try:
            fn(text)
        except refusals:
            pass
    return call


# name -> a call of the parser on the hostile text; each may refuse only as documented.
PARSERS = {
    "tools.parse_action (every episode domain's tools)": _each_tool_call,
    "untrusted_text.load_json": _refusing(load_json, Unreadable),
    "untrusted_text.parse_python": parse_python,
    "fix_function.printed_values": printed_values,
    "fix_function.body_shape": body_shape,
    "pyexpr.arithmetic_shape": arithmetic_shape,
    "python_tests.solution_source": _python_tests_source,
    "shell_state.script_of": script_of,
    "sql_query.query_of": query_of,
    "report_channel.authenticate": lambda text: authenticate(text, REPORT_MARKER, "n0nce"),
    "report_channel.harness_report": lambda text: harness_report(_report_result(text), REPORT_MARKER),
    "tool_runner.cut_output": lambda text: cut_output(text, 2000),
    "untrusted_text.boxed (math answers)": boxed,
    # task files are untrusted input too: their answer fields are read on the trusted side
    "task_formats.gsm8k_final": gsm8k_final,
    "task_formats.last_boxed": last_boxed,
}


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(text=hostile)
def test_a_trusted_parser_is_total_and_linear_on_hostile_text(name, text):
    PARSERS[name](text)


SANDBOX_DOMAINS = sorted(n for n in DOMAINS.names() if get_domain(n).uses_sandbox
                         and get_domain(n).task_count() != 0)


@pytest.fixture(scope="module")
def render_folder(tmp_path_factory):
    """An (empty) `render` environment folder: the render domains refuse to build a request on a
    machine without one (an environment error, whatever the response), which is not this test's
    subject."""
    from .conftest import environments_root
    root = tmp_path_factory.mktemp("envs")
    (root / "render").mkdir()
    with environments_root(root):
        yield root


@pytest.mark.parametrize("domain", SANDBOX_DOMAINS)
@settings(max_examples=25, deadline=DEADLINE, suppress_health_check=list(HealthCheck))
@given(text=hostile)
def test_request_building_never_raises_on_a_response(domain, text, render_folder):
    """Execute builds every response's program on the trusted side: whatever the response holds,
    it goes into the sandbox's files (where it may fail), never an exception here."""
    get_domain(domain).request(_task(domain), text, "n0nce")


EPISODE_DOMAINS = sorted(n for n in DOMAINS.names() if is_episodic(get_domain(n))
                         and get_domain(n).task_count() != 0)


@pytest.mark.parametrize("domain", EPISODE_DOMAINS)
@settings(max_examples=25, deadline=DEADLINE, suppress_health_check=list(HealthCheck))
@given(text=hostile, printed=hostile, exit_code=st.sampled_from([0, 1, -9]))
def test_observing_any_output_of_any_tool_gives_a_step(domain, text, printed, exit_code):
    """What a tool's program printed is the model's code's to shape: each domain's observe reads
    it into a Step (an observation, the state, a score), whatever it is."""
    d, task = get_domain(domain), _task(domain)
    state = d.start_state(task)
    result = ExecResult(exit_code, printed, printed[-300:], False, False, None, 1.0, 1.0, "local")
    for spec in d.tools:
        try:
            argument = text_argument(spec)
        except ValueError:
            continue
        call = ToolCall(spec.name, {**{k: "a.txt" for k in spec.parameters["properties"]},
                                    argument: text})
        d.observe_call(task, state, call, result)
