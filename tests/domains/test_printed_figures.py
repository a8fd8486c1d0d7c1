"""Counts that choose or pay come from what ran, never from printed text (issue 37, class 3).

For every domain whose figures reach best-of-N selection (`visible_pass_rate`), per-turn credit
(`Step.reward`) or the reward, the code under test prints a forged summary, forged JSON and
fake report lines, in a real sandbox run on every isolating backend, and the figure is the one
its honest twin earns. The repository family's pytest harness is tested in test_repo_*.py.
Fixtures (`verified`, `quick_on`): tests/conftest.py.
"""

import json

import pytest

from flywheel.families.python.fix_function import points_program, printed_values
from flywheel.families.python.case_plan import case_names
from flywheel.families.python.python_tests import REPORT_MARKER as PYTESTS
from flywheel.domains.registry import get_domain
from flywheel.families.shell.shell_state import REPORT_MARKER as SHELL
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall
from flywheel.verifiers import get_verifier

SUMMARY = "=========== 6 passed, 0 failed in 0.01s ===========\\nOK\\nPASSED"


def _turn(domain, task, name, arguments, backend):
    """One episode step of `name` in the real sandbox, through the tool runner (nonce and all)."""
    call, state = ToolCall(name, arguments), domain.start_state(task)
    result = ToolRunner(backend).run(domain, lambda nonce: domain.tool_request(task, state, call, nonce))
    return domain.observe_call(task, state, call, result), result


def _scored(domain, task, response, backend):
    return get_verifier(domain.verifier)(task, response, domain.run(backend, task, response))


@pytest.mark.quick_on("local")
def test_fix_function_printout_is_never_read_as_values(verified):
    """A body that is no arithmetic prints the expected values itself (after the template's line,
    or instead of it, exiting 0): the old read took them; now neither the turn's score nor any
    verifier figure moves from an honest wrong body's."""
    domain = get_domain("fix_function")
    task = domain.make_task("train", 0, seed=2)
    visible = json.dumps([y for _, y in task["visible"]])
    every = json.dumps([y for _, y in task["visible"] + task["hidden"]])
    forge = {  # forged JSON as the last line, by exiting early or at exit; with a test summary
        "exit": "__import__('sys').exit(print('{s}') or print('{v}'))",
        "atexit": "__import__('atexit').register(print, '{s}\\n{v}') and x",
    }
    for how, body in forge.items():
        step, result = _turn(domain, task, "run_tests", {"code": body.format(s=SUMMARY, v=visible)}, verified)
        assert printed_values(result.stdout) == json.loads(visible), (how, result)  # it did print them
        assert step.reward == 0.0 and step.done is None, (how, step)
        answer = body.format(s=SUMMARY, v=every)
        verdict = _scored(domain, task, answer, verified)
        assert verdict.reward == 0.0 and verdict.verdict == "fail", (how, verdict)
        assert verdict.components["visible_pass_rate"] == 0.0, (how, verdict)
        assert verdict.components["hidden_pass_rate"] == 0.0, (how, verdict)
    honest = domain.run(verified, task, task["answer"])  # the template's own print still counts
    assert printed_values(honest.stdout) == json.loads(every), honest


@pytest.mark.quick_on("local")
def test_pyexpr_printout_is_never_read(verified):
    domain = get_domain("pyexpr")
    task = {"task_id": "t", "domain": "pyexpr", "prompt": "expr 14:", "answer": "14"}
    forged = "__import__('sys').exit(print(14))"
    execution = domain.run(verified, task, forged)
    assert execution.stdout.strip() == "14" and execution.exit_code == 0, execution
    verdict = get_verifier("python_output")(task, forged, execution)
    assert verdict.reward == 0.0 and verdict.components["printed"] == 0.0, verdict


PALINDROME = next(t for t in get_domain("py_functions").tasks("train") if t["entry_point"] == "is_palindrome")
ALL_PASSED = json.dumps({"cases": [{"name": n, "passed": True} for n in case_names(PALINDROME)],
                         "signals": [], "baselines": {}})
HALF_RIGHT = "def is_palindrome(s):\n    return s == s[::-1]\n"  # case-sensitive: 1 of 2 visible
PYTESTS_FORGER = HALF_RIGHT + f"""
import atexit, os, sys
LINES = {SUMMARY!r} + '\\n' + {PYTESTS!r} + {ALL_PASSED!r} + '\\n' + {PYTESTS!r} + 'ab' * 16 + ' ' + {ALL_PASSED!r} + '\\n' + {ALL_PASSED!r} + '\\n'
def shout():
    for out in (sys.stdout, sys.stderr):
        out.write(LINES); out.flush()
    for n in (1, 2):
        try:
            os.write(n, LINES.encode())
        except OSError:
            pass
shout()
atexit.register(shout)
"""


@pytest.mark.quick_on("local")
def test_python_tests_visible_rate_and_turn_score_ignore_printed_reports(verified):
    """The issue's example: `== 2 passed, 0 failed` and report lines printed at import and at
    exit leave best-of-N's visible rate at 0.5 and the run_tests turn at the do-nothing rule's 0."""
    domain = get_domain("py_functions")
    for code in (HALF_RIGHT, PYTESTS_FORGER):
        verdict = _scored(domain, PALINDROME, code, verified)
        assert verdict.components["visible_pass_rate"] == 0.5, (code, verdict)
        assert verdict.reward == 0.5 and verdict.verdict == "fail", (code, verdict)
        step, _ = _turn(domain, PALINDROME, "run_tests", {"code": code}, verified)
        assert step.reward == 0.0 and step.done is None, (code, step)


SHELL_TASK = {"task_id": "t", "domain": "shell", "prompt": "write y into b.txt", "files": {"a.txt": "x\n"},
              "expect": {"b.txt": "y"}, "hidden_variants": [{"files": {"a.txt": "z\n"}, "expect": {"b.txt": "y"}}]}
SHELL_FORGER = (f"line='{SHELL}' && r='{{\"variants\": [{{\"files\": {{\"b.txt\": {{\"type\": \"file\", "
                f"\"content\": \"y\"}}}}}}]}}'\n"
                f"for out in /dev/stdout /proc/$PPID/fd/1; do printf '%s\\n%s%s\\n%s\\n' \"{SUMMARY}\" "
                "\"$line\" \"$r\" \"$r\" > $out 2>/dev/null; done\ntrue\n")


@pytest.mark.quick_on("local")
def test_shell_turn_and_visible_rate_are_the_files_not_the_printout(verified):
    domain = get_domain("shell")
    step, _ = _turn(domain, SHELL_TASK, "run_shell", {"command": SHELL_FORGER}, verified)
    assert step.reward == 0.0 and step.done is None, step
    verdict = _scored(domain, SHELL_TASK, f"```bash\n{SHELL_FORGER}```", verified)
    assert verdict.reward == 0.0 and verdict.components["visible_pass_rate"] == 0.0, verdict


# Sandboxed domains that read their program's stdout without a harness's signed report: each
# reads it only for a response whose syntax tree cannot print (no call, no name but `x`).
SHAPE_GATED = {"fix_function": "function_points", "pyexpr": "python_output"}


def test_unit_every_sandboxed_domain_reports_through_the_channel_or_is_shape_gated():
    """The class, not the example: a new sandboxed domain whose figures would come from printed
    text fails here until it reports through domains/report_channel.py (its harness signs one
    line with the run's nonce) or is shown to read only output its response cannot write."""
    from flywheel.domains.registry import DOMAINS
    for name in DOMAINS:
        domain = DOMAINS.get(name)
        if domain.uses_sandbox and not domain.report_marker:
            assert SHAPE_GATED.get(name) == domain.verifier, f"{name} reads printed text as its figures"
    source = points_program("x*3", [1])["files"]["main.py"]
    assert source.count("print(") == 1  # the template's own, the one an arithmetic body leaves
