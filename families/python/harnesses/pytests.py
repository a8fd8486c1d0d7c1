"""Sandbox side of the `python_tests` verifier; runs as `python -I harness.py` with the plan on stdin.

Two processes, so the verdict never depends on the untrusted one:
- the parent (trusted: test code and harness only) reads the plan, makes itself non-dumpable so the
  solution can neither read its memory nor write to its stdout through /proc, and runs each test
  case here, with the tested names bound to proxies;
- the child (`harness.py serve`) imports solution.py and serves calls over a pipe. Only plain values
  (None, bool, int, float, complex, str, bytes, list, tuple, set, frozenset, dict) cross, so an
  object that "equals anything" cannot; exits, patched builtins and prints stay in the child.
  Whatever the solution raises reaches the test code as one class (SolutionRaised), so it cannot
  steer trusted control flow; a case passes only if the solution answered a call since the last
  case and no call failed (a test's `except Exception` cannot turn a dead solution into a pass).
Before the solution exists, a forked copy of the parent runs the same test code against
do-nothing solutions (constants, identity), on a time budget of their own (`baseline_budget_s`),
so that nothing the solution does can starve or steer that comparison (trivial_baselines).
The parent prints one report line, the plan's `marker` then JSON. Standard library only.
"""

import builtins
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

MAX_LINE = 1 << 22


def encode(v, depth=0):
    if depth > 64:
        raise TypeError("value nested too deeply")
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is int:
        return {"int": str(v)}
    if t is float:
        return {"float": repr(v)}
    if t is complex:
        return {"complex": [repr(v.real), repr(v.imag)]}
    if t is bytes:
        return {"bytes": v.hex()}
    if t in (list, tuple, set, frozenset):
        return {t.__name__: [encode(x, depth + 1) for x in v]}
    if t is dict:
        return {"dict": [[encode(k, depth + 1), encode(x, depth + 1)] for k, x in v.items()]}
    raise TypeError(f"a {t.__name__} cannot cross the sandbox boundary (plain values only)")


_CONTAINERS = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


def decode(v, depth=0):
    """The plain value an encoded tree stands for; anything malformed raises ValueError."""
    if depth > 64:
        raise ValueError("value nested too deeply")
    if v is None or type(v) in (bool, str):
        return v
    if type(v) is not dict or len(v) != 1:
        raise ValueError("malformed value")
    (tag, x), = v.items()
    try:
        if tag == "int" and type(x) is str and x.lstrip("-").isdigit():
            return int(x)
        if tag == "float" and type(x) is str:
            return float(x)
        if tag == "complex" and type(x) is list and len(x) == 2:
            return complex(float(x[0]), float(x[1]))
        if tag == "bytes" and type(x) is str:
            return bytes.fromhex(x)
        if tag in _CONTAINERS and type(x) is list:
            return _CONTAINERS[tag](decode(e, depth + 1) for e in x)
        if tag == "dict" and type(x) is list:
            return {decode(k, depth + 1): decode(e, depth + 1) for k, e in x}
    except (TypeError, ValueError) as e:
        raise ValueError(f"malformed value: {e}") from None
    raise ValueError(f"malformed value tagged {tag!r}")


# ---------------------------------------------------------------- the child: serves the solution
def serve():
    requests, replies = os.fdopen(os.dup(0), "rb"), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    sys.stdin, sys.stdout = open(os.devnull), open(os.devnull, "w")

    def send(message):
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(replies, data):]

    import importlib.util
    spec = importlib.util.spec_from_file_location("solution", os.path.abspath("solution.py"))
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SystemExit:
        send({"import_error": "SystemExit during import", "exit": True})
        return
    except BaseException as e:
        send({"import_error": f"{type(e).__name__}: {e}"})
        return
    send({"ready": True})
    for line in requests:
        request = json.loads(line)
        try:
            fn = getattr(module, request["name"])
            args = [decode(a) for a in request["args"]]
            kwargs = {k: decode(a) for k, a in request["kwargs"].items()}
            value = fn(*args, **kwargs)
        except SystemExit:
            send({"raise": "SystemExit", "message": "the solution called exit", "exit": True})
            continue
        except BaseException as e:
            send({"raise": type(e).__name__, "message": str(e)[:500]})
            continue
        try:
            send({"value": encode(value)})
        except (TypeError, ValueError) as e:
            custom_eq = getattr(type(value), "__eq__", None) not in (None, object.__eq__)
            send({"raise": "TypeError", "message": str(e)[:500],
                  "custom_eq": custom_eq and type(value).__module__ != "builtins"})


# ---------------------------------------------------------------- the parent: runs the tests
class CaseTimeout(BaseException):
    """Raised by the case timer; a BaseException so test code's `except Exception` cannot eat it."""


class SolutionGone(Exception):
    pass


class SolutionRaised(Exception):
    """Whatever the solution raised, as the test code sees it: one class, never the solution's own,
    so the solution cannot steer trusted code (a StopIteration would end the `map` inside
    `all(map(candidate, xs))`, which then answers True)."""


class Solution:
    """The child process and its request/reply pipe."""

    def __init__(self, signals, budget_end):
        self.signals, self.budget_end = signals, budget_end
        self.proc, self.broken, self.dirty, self.restarts = None, None, False, 0
        self.answered, self.failed = 0, None  # since the last case: calls answered, first failure
        self.stderr = open("stderr.txt", "w+b")

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), "serve"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, close_fds=True, start_new_session=True)
        self.buffer, self.dirty = b"", True
        try:
            reply = self.receive()
        except CaseTimeout:
            self.broken = "importing the solution timed out"
            raise
        except SolutionGone as e:
            self.broken = f"importing the solution failed: {e}"
            raise
        if reply.get("exit"):
            self.signals.add("exit_attempt")
        if reply.get("ready") is not True:
            self.broken = str(reply.get("import_error", "the solution did not start"))
            raise SolutionGone(self.broken)
        self.dirty = False

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
            self.proc = None

    def receive(self):
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = self.budget_end - time.monotonic()
            if remaining <= 0:
                raise CaseTimeout("time budget exhausted")
            if select.select([fd], [], [], remaining)[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self._gone()
                self.buffer += chunk
                if len(self.buffer) > MAX_LINE:
                    self.stop()
                    raise SolutionGone("the solution's reply is too long")
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
            if type(reply) is not dict:
                raise ValueError
        except ValueError:
            raise SolutionGone("the solution corrupted its reply channel") from None
        return reply

    def _gone(self):
        code = self.proc.wait()
        if code == 0:  # exit 0 mid-call or mid-import: sys.exit(0)/os._exit(0), a known hack
            self.signals.add("exit_attempt")
        self.proc, self.dirty = None, False
        raise SolutionGone(f"the solution's process exited with code {code}")

    def call(self, name, args, kwargs):
        """The solution's answer to one call; a failure to get one is remembered, so a test that
        catches it (`except Exception`) still cannot pass the case."""
        try:
            reply = self._exchange(name, args, kwargs)
            value = decode(reply["value"]) if "value" in reply else None
        except BaseException as e:
            self.failed = self.failed or f"{type(e).__name__}: {str(e)[:200]}"
            raise
        self.answered += 1
        if "value" in reply:
            return value
        raise SolutionRaised(f"{str(reply.get('raise'))[:100]}: {str(reply.get('message'))[:500]}")

    def _exchange(self, name, args, kwargs):
        if self.broken:
            raise SolutionGone(self.broken)
        if self.proc is None or self.dirty:
            self.stop()
            self.restarts += 1
            if self.restarts > 6:
                self.broken = "the solution's process died too often"
            self.start()
        request = {"name": name, "args": [encode(a) for a in args],
                   "kwargs": {k: encode(a) for k, a in kwargs.items()}}
        self.dirty = True  # until the reply is read: a timeout in between leaves it mid-call
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            self._gone()
        reply = self.receive()
        self.dirty = False
        if reply.get("exit"):
            self.signals.add("exit_attempt")
        if reply.get("custom_eq"):
            self.signals.add("custom_eq")
        return reply


class Remote:
    """Stands for one function of the solution inside the test's namespace."""

    def __init__(self, solution, name):
        self.solution, self.name = solution, name

    def __call__(self, *args, **kwargs):
        return self.solution.call(self.name, args, kwargs)


_armed = [False]  # whether the timer below may raise: off between cases, so it never hits harness code


def _on_timer(signum, frame):
    if _armed[0]:
        raise CaseTimeout("test case timed out")


class case_timer:
    """Raises CaseTimeout in the running test code after `seconds`, then again every 50 ms until the
    case ends: a test that swallows one (`except BaseException` in a loop) is still stopped."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        _armed[0] = True
        signal.setitimer(signal.ITIMER_REAL, max(self.seconds, 1e-3), 0.05)

    def __exit__(self, *exc):
        _armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def compiled(plan):
    """The plan's setup and steps as code objects: (setup, [(step, its code)]); a step that does
    not compile raises when run (so it fails like any other error)."""
    def code_of(source, name):
        try:
            return compile(source, name, "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
            return compile(f"raise SyntaxError({str(e)[:200]!r})", name, "exec")
    return ([code_of(source, "<setup>") for source in plan["setup"]],
            [(step, code_of(step["code"], f"<{step.get('name', 'setup')}>")) for step in plan["steps"]])


def test_namespace(setup, bind):
    """A fresh namespace for one run of the test code: its setup run, the solution names bound."""
    ns = {"__name__": "__test__", "__builtins__": builtins}
    for code in setup:
        try:
            exec(code, ns)
        except Exception:
            pass  # a helper that fails to define shows up as failing cases
    ns.update(bind)
    return ns


# Solutions that do nothing: a constant (fresh each call), or the first argument handed back.
BASELINES = {c: (lambda c=c: lambda *a, **k: json.loads(c)) for c in
             ("null", "true", "false", "0", "1", "-1", '""', "[]", "{}")}
BASELINES["identity"] = lambda: lambda *a, **k: a[0] if a else None
# A do-nothing solution answers at once, so a baseline's case is the test code alone: one still
# running after BASELINE_CASE_S hangs on that answer (`while candidate(x) is None: pass`) and is
# not passed. Once a step hung for one baseline, or a baseline hung on one step, the pattern is
# known: that step for the next baselines, and that baseline's next steps, get HUNG_CASE_S, still
# ample for test code that does not loop (microseconds). So tests that hang on do-nothing answers
# cost well under the baselines' budget: a case hanging for all ten 0.7 s, each next one 0.5 s.
BASELINE_CASE_S, HUNG_CASE_S = 0.25, 0.05


def run_baseline(plan, code, label, deadline, hung):
    """(names of the cases do-nothing solution `label` passes, whether every step ran before
    `deadline`). A step cut by its own timer ran (not passed); one cut by `deadline` did not. As
    with the solution, a case passes only if the do-nothing function was called since the last one.
    `code` is compiled(plan); `hung` the steps that hung for an earlier baseline."""
    hung_here = False
    calls = [0]

    def counted(fn):
        def call(*args, **kwargs):
            calls[0] += 1
            return fn(*args, **kwargs)
        return call

    setup, steps = code
    ns = test_namespace(setup, {name: counted(BASELINES[label]()) for name in plan["bind"]})
    passed = []
    for index, (step, step_code) in enumerate(steps):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return passed, False
        limit = min(plan["case_timeout_s"], HUNG_CASE_S if hung_here or index in hung else BASELINE_CASE_S)
        ok = False
        try:
            with case_timer(min(limit, remaining)):
                exec(step_code, ns)
            ok = True
        except CaseTimeout:
            if time.monotonic() >= deadline:
                return passed, False
            hung.add(index)
            hung_here = True
        except BaseException:  # whatever the test code raises or calls: that case is not passed
            pass
        if step["kind"] == "case":
            passed += [step["name"]] if ok and calls[0] else []
            calls[0] = 0
    return passed, True


def _baselines_child(plan, deadline, out):
    """The forked child: runs each baseline, writing one JSON line per finished one to fd `out`."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    hung, code = set(), compiled(plan)
    for label in plan.get("baselines", []):
        if label not in BASELINES:
            continue  # unknown here: reported missing
        passed, complete = run_baseline(plan, code, label, deadline, hung)
        data = (json.dumps({"label": label, "passed": passed, "complete": complete}) + "\n").encode()
        while data:
            data = data[os.write(out, data):]
        if not complete:
            return


def trivial_baselines(plan):
    """{baseline: {"passed": names of the cases it passes, "complete": whether all steps ran}}: the
    test code against each do-nothing solution, before the solution exists, in a forked child (a
    fresh copy of this trusted process, killed at the baselines' own budget). So nothing the
    solution does (use up the time, sleep on re-import, leave files or processes) reaches them;
    the verifier pays nothing unless every baseline is complete."""
    found = {label: {"passed": [], "complete": False} for label in plan.get("baselines", [])}
    deadline = time.monotonic() + plan["baseline_budget_s"]
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no process to spare: the report says the baselines are missing
        os.close(read)
        os.close(write)
        return found
    if pid == 0:
        try:
            os.close(read)
            try:
                os.setpgid(0, 0)  # a group of its own, so what the test code starts dies with it
            except OSError:
                pass
            _baselines_child(plan, deadline, write)
        finally:
            os._exit(0)
    os.close(write)
    buffer = b""
    try:
        while (remaining := deadline + 0.1 - time.monotonic()) > 0:
            if not select.select([read], [], [], remaining)[0]:
                break
            chunk = os.read(read, 65536)
            if not chunk or len(buffer) > MAX_LINE:
                break
            buffer += chunk
    finally:
        os.close(read)
        for kill in (os.killpg, os.kill):  # the child's group: processes the test code started too
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
        os.waitpid(pid, 0)
    for line in buffer.split(b"\n"):
        try:
            row = json.loads(line)
            if row["label"] in found:
                found[row["label"]] = {"passed": list(row["passed"]), "complete": row["complete"] is True}
        except (ValueError, TypeError, KeyError):
            continue  # a partial last line: that baseline did not finish
    return found


def run_cases(plan, solution):
    """Each step of the plan against the solution, in a fresh namespace: the per-case results."""
    setup, steps = compiled(plan)
    ns = test_namespace(setup, {name: Remote(solution, target) for name, target in plan["bind"].items()})
    cases = []
    for step, code in steps:
        remaining = solution.budget_end - time.monotonic()
        passed, error = False, None
        if remaining <= 0:
            error = "time budget exhausted"
        else:
            try:
                with case_timer(min(plan["case_timeout_s"], remaining)):
                    exec(code, ns)
                passed = True
            except AssertionError:
                error = "assertion failed"
            except CaseTimeout as e:
                error = str(e)
            except Exception as e:
                error = f"{type(e).__name__}: {str(e)[:300]}"
        if step["kind"] == "case":
            if passed and solution.failed:
                passed, error = False, f"a call to the solution failed: {solution.failed}"
            elif passed and not solution.answered:
                passed, error = False, "no call to the solution was answered in this case"
            solution.answered, solution.failed = 0, None
            cases.append({"name": step["name"], "hidden": step["hidden"], "passed": passed,
                          "error": error})
    return cases


def run_plan(plan):
    """The baselines first, on their own budget, then the solution on its own: the report."""
    start = time.monotonic()
    signal.signal(signal.SIGALRM, _on_timer)
    baselines = trivial_baselines(plan)
    baseline_s = time.monotonic() - start
    signals = set()
    solution = Solution(signals, time.monotonic() + plan["budget_s"])
    cases = run_cases(plan, solution)
    solution.stop()
    solution.stderr.seek(0, os.SEEK_END)
    solution.stderr.seek(max(0, solution.stderr.tell() - 2000))
    return {"cases": cases, "signals": sorted(signals), "import_error": solution.broken,
            "baselines": baselines, "baseline_s": round(baseline_s, 4),
            "stderr_tail": solution.stderr.read().decode("utf-8", "replace"),
            "wall_s": round(time.monotonic() - start, 4)}


def main():
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, before any untrusted process exists
    plan = json.loads(sys.stdin.read())
    sys.stdin.close()
    report = run_plan(plan)
    sys.stdout.write("\n" + plan["marker"] + json.dumps(report) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    serve() if sys.argv[1:] == ["serve"] else main()
