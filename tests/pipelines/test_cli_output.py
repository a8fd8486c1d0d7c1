"""Output into pipes: one diagnostic per line, nothing wrapped, no traceback when the reader
leaves early; library warnings go to the run's log, not the screen. The real commands run through
real shell pipes."""

import json
import logging
import signal
import subprocess
import time
import warnings

import pytest

from flywheel.cli.run_log import RunLog


def sh(command: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    done = sh("flywheel domains --format json | head -1")
    assert len(done.stdout.splitlines()) == 1 and json.loads(done.stdout)["name"]
    assert done.stderr == ""
    # output far larger than a pipe's buffer, so the write really meets the closed pipe
    big = f"flywheel sql 'SELECT * FROM range(300000)' --run-dir {tmp_path} --format csv"
    done = sh(f"set -o pipefail; {big} | head -2")
    assert done.stdout.splitlines() == ["range", "0"] and done.stderr == ""
    assert done.returncode == 141  # 128 + SIGPIPE, as a C tool's reader would see
    table = big.replace("range(300000)", "range(8000)").replace(" --format csv", "")  # > 64 KiB drawn
    done = sh(f"{table} 2>&1 | head -3")
    assert "Traceback" not in done.stdout + done.stderr and "range" in done.stdout


def test_diagnostics_are_one_line_each_in_a_pipe(tmp_path):
    deep = tmp_path / ("a-folder-with-a-long-name-" * 3) / "tasks-with-a-long-file-name.jsonl"
    deep.parent.mkdir(parents=True)
    deep.write_text('{"task_id": "a", "domain": "math", "prompt": "What is 1+1?"}\n'
                    "{not json\n"
                    '{"task_id": "b", "domain": "python_tests", "prompt": "def f():", '
                    '"entry_point": "f", "test": "def check(candidate):\\n    pass\\n"}\n')
    done = sh(f"flywheel tasks validate {deep} 2>&1 | grep ': line '")
    lines = done.stdout.splitlines()
    assert [line.split(": ")[1] for line in lines] == ["line 1", "line 2", "line 3"], lines
    assert all(line.startswith(str(deep)) and len(line) > 100 for line in lines)
    assert "field `answer` missing" in lines[0] and "invalid JSON" in lines[1]
    table = sh("flywheel domains | cat").stdout.splitlines()
    # a table row holds a whole description, however wide that makes it
    assert any("the answer is the sum" in row and len(row) > 120 for row in table)


def test_library_warnings_go_to_the_run_log_not_the_screen(tmp_path, capfd):
    with RunLog(str(tmp_path)) as log:
        logging.warning("Resource module is not available for current platform")
        logging.getLogger("apache_beam.io").warning("a library speaks")
        warnings.warn("a deprecation somewhere below")
        log.print("[bold]shown[/] on the screen")
        log.note("timing stage 1.0 s")
    out, err = capfd.readouterr()
    assert "Resource module" not in out + err and "a library speaks" not in out + err
    lines = (tmp_path / "run.log").read_text().splitlines()
    assert any(line.endswith("WARNING root: Resource module is not available for current "
                             "platform") for line in lines)
    assert any("WARNING apache_beam.io: a library speaks" in line for line in lines)
    assert any("a deprecation somewhere below" in line for line in lines)
    assert any(line.endswith(" shown on the screen") for line in lines)  # markup gone
    assert lines[-1].split(None, 2)[2].startswith("command ended after")
    assert all(line[:4].isdigit() and line[19] == "Z" for line in lines)  # each line stamped


@pytest.mark.slow
def test_ctrl_c_ends_a_run_with_a_resume_hint_not_a_traceback(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(["flywheel", "run", "--run-dir", str(run_dir), "--iterations", "3",
                             "--tasks-per-domain", "4", "--heldout-per-domain", "4",
                             "--n-samples", "4", "--warm-start-max-steps", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            # as from a terminal: a suite started in the background (`cmd &` in a
                            # script) hands its children SIGINT ignored, and Python keeps it so
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while not (run_dir / "status.json").exists() and time.time() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130 and "Traceback" not in out, out
    assert out.splitlines()[-1] == f"interrupted: resume with flywheel run --run-dir {run_dir}"
    log = (run_dir / "run.log").read_text()
    assert f"interrupted: resume with flywheel run --run-dir {run_dir}" in log
