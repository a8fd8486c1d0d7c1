"""Sandbox sessions: files across turns, nothing running across turns, fast rollback, exact replay."""

import json
import os
import time

import pytest

from flywheel.sandbox import SandboxError, get_backend
from flywheel.sandbox.session import SandboxSession

TASK = {"solution.py": "def add(a, b):\n    return a - b\n",
        "test_solution.py": "import unittest\nfrom solution import add\n\n"
                            "class T(unittest.TestCase):\n    def test_add(self):\n"
                            "        self.assertEqual(add(2, 3), 5)\n"}
TESTS = ("python", "-m", "unittest", "-q")


@pytest.fixture(scope="module")
def backend():
    with get_backend("local") as b:
        yield b


@pytest.fixture
def session(backend):
    with SandboxSession(backend, TASK) as s:
        yield s


def test_an_episode_edits_and_reruns(session):
    assert session.run(TESTS).exit_code == 1  # the task's bug
    session.write({"solution.py": "def add(a, b):\n    return a + b\n"})
    result = session.run(TESTS)
    assert result.exit_code == 0 and "OK" in result.stderr


def test_what_a_turn_writes_the_next_turn_sees(session):
    session.run(("python", "-c", "open('notes.txt', 'w').write('from turn 1')"))
    assert session.run(("python", "-c", "print(open('notes.txt').read())")).stdout == "from turn 1\n"
    assert session.files()["notes.txt"] == "from turn 1"


def test_nothing_a_turn_leaves_running_survives_it(session):
    code = ("import ctypes, os, time; ctypes.CDLL(None).prctl(15, b'fw-sess', 0, 0, 0)\n"
            "if os.fork() == 0:\n    os.setsid(); time.sleep(60)")
    assert session.run(("python", "-c", code)).wall_ms < 5000
    procs = session.run(("python", "-c", "import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]))"))
    assert int(procs.stdout) <= 2
    assert not any(open(f"/proc/{p}/comm").read().strip() == "fw-sess"
                   for p in os.listdir("/proc") if p.isdigit() and os.path.exists(f"/proc/{p}/comm"))


def test_restore_rolls_back_to_the_initial_files_fast(session):
    session.write({"solution.py": "broken", "extra/new.py": "x = 1"})
    session.run(("python", "-c", "import os; os.remove('test_solution.py'); open('junk', 'w').write('j' * 100000)"))
    start = time.monotonic()
    session.restore()
    assert time.monotonic() - start < 0.5
    assert session.files() == TASK


def test_named_snapshots(session):
    session.write({"solution.py": "def add(a, b):\n    return a + b\n"})
    session.snapshot("fixed")
    session.write({"solution.py": "oops"})
    session.restore("fixed")
    assert session.run(TESTS).exit_code == 0


# The tests' verdict without unittest's "Ran 1 test in 0.000s", which no replay can promise.
QUIET_TESTS = ("python", "-c", "import os, sys, unittest; sys.path.insert(0, '.')\n"
               "suite = unittest.defaultTestLoader.loadTestsFromName('test_solution')\n"
               "result = unittest.TextTestRunner(stream=open(os.devnull, 'w')).run(suite)\n"
               "print(len(result.failures), len(result.errors)); sys.exit(not result.wasSuccessful())")


def test_the_log_replays_exactly(backend, session):
    session.run(QUIET_TESTS)
    session.write({"solution.py": "def add(a, b):\n    return a + b\n"})
    session.run(QUIET_TESTS)
    session.run(("python", "-c", "import sys; print(open('solution.py').read()); sys.exit(4)"))
    log = json.loads(json.dumps(session.log))  # it is plain data: store it with the trajectory
    compared = SandboxSession.replay(backend, session.initial_files, log)
    assert [c["replayed"]["exit_code"] for c in compared] == [1, 0, 4]
    assert all(c["same"] for c in compared)


def test_symlinks_the_code_plants_cannot_redirect_edits(session):
    session.run(("python", "-c", "import os; os.symlink('/proc/self', 'a'); os.mkfifo('pipe')"))
    with pytest.raises(ValueError, match="leads out"):
        session.write({"a/mem": "x"})
    session.snapshot("with-fifo")  # a FIFO is skipped, not opened (which would hang)
    assert "pipe" not in session.files() and session.run(("python", "-c", "print(1)")).stdout == "1\n"


def test_only_local_has_sessions():
    with get_backend("unsafe-subprocess") as other, pytest.raises(SandboxError, match="no sessions"):
        SandboxSession(other, TASK)


def test_what_a_turn_emits_comes_back_storable(session):
    """Names of any bytes, contents of invalid UTF-8, lone surrogates in the model's edits: every
    turn and every read comes back as text a table can store, never an exception."""
    session.write({"edit.py": "x = '\\udcff'\nprint('\\udcff \\ud800')\n# \udcff"})
    result = session.run(("python", "edit.py"))
    assert result.exit_code == 1 and "Error" in result.stderr and result.kill_reason is None, result
    session.run(("python", "-c", "open(b'\\xff\\x01.txt', 'wb').write(b'\\xfe\\x00')"))
    files = session.files()
    assert files["\\xff\x01.txt"] == "\ufffd\x00", files  # invalid bytes escaped, the rest kept
    json.dumps(files, ensure_ascii=False).encode("utf-8")
