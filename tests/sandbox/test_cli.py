"""`flywheel sandbox exec`: one JSON object, exit 0 whatever the code did, 1 for the sandbox's own failures."""

import argparse
import json
import subprocess
import sys

import pytest

from flywheel.cli import sandbox as sandbox_cli
from flywheel.sandbox import Limits, available_backends


def cli(argv, capsys):
    parser = argparse.ArgumentParser()
    sandbox_cli.add_parser(parser.add_subparsers(dest="command"))
    code = sandbox_cli.main(parser.parse_args(argv))
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("source,exit_code,reason", [
    ("print('ok')", 0, None), ("raise SystemExit(3)", 3, None),
    ("import time; time.sleep(10)", -9, "timeout"), ("x = bytearray(1 << 30)", 1, None)])  # MemoryError: the code's own (exit_status.py)
def test_exec_prints_the_result_and_exits_zero(tmp_path, capsys, source, exit_code, reason):
    program = tmp_path / "prog.py"
    program.write_text(source)
    code, result = cli(["sandbox", "exec", "--timeout", "1.5", "--memory-mb", "128", str(program)], capsys)
    assert code == 0 and result["exit_code"] == exit_code and result["kill_reason"] == reason
    assert set(result) >= {"stdout", "stderr", "timed_out", "truncated", "wall_ms", "cpu_ms", "backend"}


def test_exec_passes_arguments_and_stdin(tmp_path, capsys):
    program, data = tmp_path / "prog.py", tmp_path / "in.txt"
    program.write_text("import sys; print(sys.argv[1:], sys.stdin.read())")
    data.write_text("payload")
    code, result = cli(["sandbox", "exec", "--stdin", str(data), str(program), "a", "b"], capsys)
    assert result["stdout"] == "['a', 'b'] payload\n"


def test_an_environment_failure_exits_one(tmp_path, capsys):
    program = tmp_path / "prog.py"
    program.write_text("print(1)")
    code, result = cli(["sandbox", "exec", "--backend", "docker", "--docker-host",
                        "unix:///nonexistent/docker.sock", str(program)], capsys)
    assert code == 1 and result["kind"] == "environment"


def test_runs_as_a_module(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text("print(6 * 7)")
    out = subprocess.run([sys.executable, "-m", "flywheel.cli.sandbox", "sandbox", "exec",
                          str(program)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout)["stdout"] == "42\n"


def parser():
    p = argparse.ArgumentParser()
    sandbox_cli.add_parser(p.add_subparsers(dest="command"))
    return p


def test_sandbox_options_reach_the_backend(tmp_path, capsys):
    program = tmp_path / "prog.py"
    program.write_text("print(1)")
    # `remote` needs no optional extra (docker would need its SDK just to say so)
    code, result = cli(["sandbox", "exec", "--backend", "remote", "--sandbox-options",
                        "urls=http://127.0.0.1:9", str(program)], capsys)
    assert code == 1 and result["kind"] == "environment" and "http://127.0.0.1:9" in result["error"]


def test_an_option_that_is_not_key_value_exits_two(tmp_path, capsys):
    program = tmp_path / "prog.py"
    program.write_text("print(1)")
    args = parser().parse_args(["sandbox", "exec", "--sandbox-options", "runsc", str(program)])
    assert sandbox_cli.main(args) == 2 and "KEY=VALUE" in capsys.readouterr().err


def test_defaults_and_help_come_from_the_sandbox(capsys):
    args = parser().parse_args(["sandbox", "exec", "prog.py"])
    assert (args.timeout, args.memory_mb) == (Limits().timeout_s, Limits().memory_mb)
    with pytest.raises(SystemExit):
        parser().parse_args(["sandbox", "exec", "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, at hyphens too
    assert all(name in text for name in available_backends())
