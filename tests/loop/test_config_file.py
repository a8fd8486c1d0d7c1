"""`flywheel run --config run.toml`: every setting from a file, flags over it, mistakes named with
file and line, `--print-config`, and a file that reproduces a flag-only run exactly."""

import json
import subprocess

import pytest

from flywheel.settings.config import RunConfig
from flywheel.loop.config_file import ConfigFileError, config_toml, read_config_file
from flywheel.settings.layout import RunLayout
from flywheel.schemas import TABLES
from flywheel.schemas.compare import comparable_rows
from flywheel.trainer.algorithm import Algorithm

TINY_TOML = """\
seed = 3
iterations = 1

[rollout]
tasks_per_domain = 4
heldout_per_domain = 4
n_samples = 4

[warm_start]
max_steps = 20

[beam]
direct_running_mode = "in_memory"
"""
TINY_FLAGS = ("--seed 3 --iterations 1 --tasks-per-domain 4 --heldout-per-domain 4 "
              "--n-samples 4 --warm-start-max-steps 20")


def write(tmp_path, text, name="run.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_file_sets_every_kind_of_setting(tmp_path):
    file = read_config_file(write(tmp_path, 'run_dir = "runs/x"\n' + TINY_TOML + (
        '[train]\nlr = 1\nbetas = [0.8, 0.9]\nclip_high = 0.28\n[policy]\noptions = ["d_model=32"]\n')))
    config = RunConfig.from_dict(file.values)
    assert config.seed == 3 and config.rollout.n_samples == 4 and config.warm_start.max_steps == 20
    assert config.train.lr == 1.0 and isinstance(config.train.lr, float)
    assert config.train.betas == (0.8, 0.9) and config.train.clip_high == 0.28
    assert config.policy.options == ("d_model=32",) and config.rollout.domains == RunConfig().rollout.domains
    assert file.keys == {"seed", "iterations", "rollout.tasks_per_domain", "rollout.heldout_per_domain",
                         "rollout.n_samples", "warm_start.max_steps", "train.lr", "train.betas",
                         "train.clip_high", "policy.options"}
    assert file.beam_args == ["--direct_running_mode=in_memory"] and file.run_dir == "runs/x"


def test_the_algorithm_is_one_table_and_moved_keys_are_read_at_their_new_home(tmp_path):
    file = read_config_file(write(tmp_path, '[algorithm]\nadvantage = "rloo"\ncredit = "turn"\n'
                                  'discount = 0.9\nloss = "dapo"\naggregation = "token-mean"\n'))
    assert RunConfig.from_dict(file.values).algorithm == Algorithm("rloo", "turn", 0.9, "dapo",
                                                                   "token-mean")
    assert file.keys == {f"algorithm.{k}" for k in ("advantage", "credit", "discount", "loss",
                                                    "aggregation")}
    # A file written before the table is refused, naming the new home of each moved key.
    with pytest.raises(ConfigFileError, match="line 4: `train.loss` is now `algorithm.loss`"):
        read_config_file(write(tmp_path, '[train]\nlr = 1e-4\n\nloss = "dapo"\n'))
    with pytest.raises(ConfigFileError, match="line 2: `rollout.context` is now `episode.context`"):
        read_config_file(write(tmp_path, '[rollout]\ncontext = "cut"\n'))


@pytest.mark.parametrize("text, message", [
    ("[algorithm]\nloss = 3\n", "line 2: `algorithm.loss` must be a string, got 3"),
    ("seed = 3\n\n[rollout]\nn_sampels = 4\n",
     "line 4: unknown key `rollout.n_sampels` (did you mean `rollout.n_samples`?)"),
    ("sed = 1\n", "line 1: unknown key `sed` (did you mean `seed`?)"),
    ("seed = 1\nrollout.n_sampels = 4\n", "line 2: unknown key `rollout.n_sampels`"),
    ("[trainer]\nlr = 1\n", "line 1: unknown key `trainer` (did you mean `train`?)"),
    ("seed = 'x'\n", "line 1: `seed` must be an integer, got 'x'"),
    ("iterations = true\n", "`iterations` must be an integer, got True"),
    ("[rollout]\ndomains = 'add'\n", "line 2: `rollout.domains` must be an array of a string"),
    ("[train]\nbetas = [0.9]\n", "`train.betas` must be an array of 2 values"),
    ("rollout = 3\n", "`rollout` must be a table"),
    ("seed = \n", "not valid TOML: Invalid value (at line 1, column 8)"),
    ("[beam]\nrunnr = 'x'\n", "line 2: unknown key `beam.runnr`: not a Beam pipeline option "
                              "(did you mean `runner`?)"),
])
def test_a_bad_file_is_refused_naming_file_line_and_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigFileError) as e:
        read_config_file(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value), str(e.value)


def test_print_config_round_trips(tmp_path):
    config = RunConfig()
    again = read_config_file(write(tmp_path, config_toml(config.to_dict(), "runs/a",
                                                         {"runner": "DirectRunner"})))
    assert RunConfig.from_dict(again.values) == config
    assert again.run_dir == "runs/a" and again.beam_args == ["--runner=DirectRunner"]


def test_flags_override_the_file_and_print_config_exits(tmp_path, capsys):
    path = write(tmp_path, f'run_dir = "{tmp_path / "never"}"\n' + TINY_TOML)
    done = subprocess.run(["flywheel", "run", "--config", path, "--print-config", "--n-samples", "6",
                           "--lr", "0.001", "--direct_num_workers", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = read_config_file(write(tmp_path, done.stdout, "printed.toml"))
    config = RunConfig.from_dict(printed.values)
    assert config.rollout.n_samples == 6 and config.train.lr == 0.001  # the flags
    assert config.seed == 3 and config.rollout.tasks_per_domain == 4  # the file
    # Beam options given: the flag's, and the runner the CLI picks (the file's equals the default)
    assert set(printed.beam_args) == {"--direct_num_workers=2", "--runner=DirectRunner"}
    assert not (tmp_path / "never").exists()
    from flywheel.cli.main import main  # the bad files in process (not a terminal either)
    capsys.readouterr()

    def told(text: str) -> str:
        bad_file = write(tmp_path, text, "bad.toml")
        assert main(["run", "--config", bad_file]) == 2
        out = capsys.readouterr()
        return out.out + out.err
    assert told("sed = 1\n").splitlines() == [f"error: {tmp_path}/bad.toml: line 1: unknown key "
                                              "`sed` (did you mean `seed`?)"]
    assert told("[rollout]\nzzzzzz = 2\n").startswith(
        f"error: {tmp_path}/bad.toml: line 2: unknown key `rollout.zzzzzz`; [rollout] takes "
        "domains, ")  # brackets shown, not read as markup
    assert told("[beam]\ndirect_running_mode = 'fast'\n").startswith(
        f"error: {tmp_path}/bad.toml: line 2: `beam.direct_running_mode` = 'fast': argument "
        "--direct_running_mode: invalid choice: 'fast'")


def table_rows(run_dir, table):
    rows = RunLayout(str(run_dir)).read_table(table).to_pylist()
    return comparable_rows(rows)


@pytest.mark.slow
def test_a_config_file_reproduces_a_flag_only_run_exactly(tmp_path):
    flags_run, file_run = tmp_path / "flags", tmp_path / "file"
    done = subprocess.run(f"flywheel run --run-dir {flags_run} {TINY_FLAGS} 2>&1 | cat", shell=True,
                          capture_output=True, text=True, timeout=600)
    path = write(tmp_path, f'run_dir = "{file_run}"\n' + TINY_TOML)
    again = subprocess.run(["flywheel", "run", "--config", path], capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    for table in TABLES:
        assert table_rows(flags_run, table) == table_rows(file_run, table), table
    assert len(table_rows(file_run, "trajectories")) == 4 * 4 * 4
    configs = [json.loads((d / "run.json").read_text())["config"] for d in (flags_run, file_run)]
    assert configs[0] == configs[1] and configs[0]["rollout"]["n_samples"] == 4
    # The piped screen: one line per message, no library warnings; run.log holds it and timings.
    lines = done.stdout.splitlines()
    assert not any(line.startswith(("WARNING", "Traceback")) for line in lines), done.stdout
    assert any(line.startswith("iteration 0  held-out pass@1 all ") for line in lines)
    assert any("trajectories GROUP BY 1\" --run-dir" in line for line in lines)
    log = (flags_run / "run.log").read_text()
    for line in lines:
        if line.strip() and not line.startswith("iterations "):  # the progress bar is screen-only
            assert line.rstrip() in log, line
    assert "timing iteration 0: rollout " in log and "command ended after" in log


def test_the_readme_example_config_is_valid(tmp_path):
    import re
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    first, *others = re.findall(r"```toml\n(.*?)```", readme, re.S)  # run.toml, then snippets
    for example in others:  # e.g. the [steering] one: each a valid config of its own
        RunConfig.from_dict(read_config_file(write(tmp_path, example)).values)
    file = read_config_file(write(tmp_path, first))
    assert file.run_dir == "runs/demo" and RunConfig.from_dict(file.values).iterations == 6
    assert file.beam_args == ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def test_a_yaml_file_holds_the_same_keys(tmp_path):
    path = write(tmp_path, "seed: 3\nrollout:\n  domains: [add, pyexpr]\n  n_samples: 4\n"
                           "train:\n  lr: 5e-4\n  betas: [0.9, 0.95]\nbeam:\n  direct_num_workers: 2\n",
                 "run.yaml")
    file = read_config_file(path)
    config = RunConfig.from_dict(file.values)
    assert config.seed == 3 and config.rollout.domains == ("add", "pyexpr")
    assert config.train.lr == 5e-4 and config.train.betas == (0.9, 0.95)
    assert file.beam_args == ["--direct_num_workers=2"]
    bad = write(tmp_path, "seed: 3\nrollout:\n  n_sampels: 4\n", "bad.yaml")
    with pytest.raises(ConfigFileError, match=r"bad.yaml: line 3: unknown key `rollout.n_sampels`"):
        read_config_file(bad)
    with pytest.raises(ConfigFileError, match="not valid YAML"):
        read_config_file(write(tmp_path, "seed: [3\n", "broken.yml"))
