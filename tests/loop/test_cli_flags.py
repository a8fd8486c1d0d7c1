"""`flywheel run` refuses an argument that no Flywheel flag or Beam option takes, before anything
starts, naming it and the closest known flag."""

import subprocess

from flywheel.loop.flag_check import unknown_arguments


def test_known_flywheel_and_beam_flags_pass():
    argv = ["--iterations", "2", "--run-dir", "d", "--runner", "DirectRunner",
            "--direct_num_workers=2", "--direct_running_mode", "multi_processing",
            "--experiments", "a", "--experiments=b", "--project", "p", "--print-config"]
    assert unknown_arguments(argv) == []


def test_each_unknown_argument_is_named_with_the_closest_flag():
    messages = unknown_arguments(["--iteratons", "3", "--direct_num_workrs=2", "stray",
                                  "--zzzzzz", "--seed", "1"])
    assert messages == ["unknown flag --iteratons; did you mean --iterations?",
                        "unknown flag --direct_num_workrs; did you mean --direct_num_workers?",
                        "unexpected argument 'stray': flywheel run takes flags only",
                        "unknown flag --zzzzzz; see flywheel run --help"]


def test_a_beam_option_without_its_value_is_one_line_not_beams_usage():
    assert unknown_arguments(["--dry_run"]) == ["argument --dry_run: expected one argument"]
    assert unknown_arguments(["--direct_running_mode", "fast"]) == [
        "argument --direct_running_mode: invalid choice: 'fast' (choose from 'in_memory', "
        "'multi_threading', 'multi_processing')"]


def test_a_mistyped_flag_stops_the_run_before_it_starts(tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run(f"flywheel run --run-dir {run_dir} --confg x 2>&1 | cat", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["error: unknown flag --confg; did you mean --config?"]
    assert not run_dir.exists()


def test_the_command_line_starts_without_beam_or_torch():
    """`flywheel --help` and the commands that do not run a pipeline import neither Beam nor
    torch at start (each costs seconds); they come in when a command needs them."""
    import json
    import sys
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys; import flywheel.cli.main; "
         "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
         "('apache_beam', 'torch', 'transformers'))))"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
