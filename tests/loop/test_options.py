"""FlywheelOptions and the Rollout transform: the run's flags live among Beam's pipeline options,
and one iteration is a composite transform whose named steps show in the job graph."""

import subprocess
from pathlib import Path
import sys

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from flywheel.settings.layout import RunLayout
from flywheel.loop.options import FlywheelOptions
from flywheel.pipelines.rollout import IterationSpec, Rollout

from tests.run_configs import tiny_config


def test_flywheel_flags_and_beam_flags_parse_together():
    options = PipelineOptions(["--iterations", "2", "--domains", "add,reverse", "--shards", "3",
                               "--sandbox-options", "warm=false", "--runner", "DirectRunner",
                               "--direct_num_workers", "2", "--run-dir", "gs://bucket/run"])
    flywheel = options.view_as(FlywheelOptions)
    config, explicit = flywheel.run_config()
    assert config.iterations == 2 and config.rollout.domains == ("add", "reverse")
    assert config.rollout.shards == 3 and config.rollout.sandbox_options == ("warm=false",)
    assert explicit == {"iterations", "rollout.domains", "rollout.shards", "rollout.sandbox_options"}
    assert flywheel.run_dir == "gs://bucket/run"
    assert options.view_as(StandardOptions).runner == "DirectRunner"
    assert config.seed == 0 and config.rollout.n_samples == 8  # defaults stand where not given


def test_tasks_alone_train_only_those_tasks():
    """--tasks without --domains (flag, --set or config file) leaves the built-in domains out,
    and with them their warm start (warm_start.py trains on the run's domains only)."""
    alone, _ = PipelineOptions(["--tasks", "a.jsonl"]).view_as(FlywheelOptions).run_config()
    assert alone.rollout.task_files == ("a.jsonl",) and alone.rollout.domains == ()
    both, _ = PipelineOptions(["--tasks", "a.jsonl", "--domains", "reverse"]
                              ).view_as(FlywheelOptions).run_config()
    assert both.rollout.domains == ("reverse",)
    filed, _ = PipelineOptions(["--tasks", "a.jsonl"]).view_as(FlywheelOptions).run_config(
        {**tiny_config().to_dict()}, {"rollout.domains"})
    assert filed.rollout.domains == tiny_config().rollout.domains


@pytest.mark.parametrize("argv, message", [
    (["--policy", "nope"], "unknown policy backend 'nope'"),
    (["--advantage", "nope"], "unknown advantage estimator 'nope'"),
    (["--sandbox-options", "runsc"], "not KEY=VALUE"),
    (["--sandbox", "nope"], "unknown sandbox backend 'nope'"),
    (["--sandbox-options", "runtime=runsc"], "'local' does not take the options \\['runtime'\\]"),
    (["--sampler", "nope"], "unknown sampler 'nope'"),
    (["--band", "0.9,0.1"], "steering.band"),
    (["--domain-weights", "add"], "steering.weights item 'add' is not KEY=VALUE"),
    (["--tier-shares", "a=0.8,b=0.5"], "more than 1"),
    (["--domain-floor", "1.5"], "steering.floor"),
    (["--top-up", "1.5"], "steering.top_up"),
    (["--domain-scale", "nope"], "unknown domain_scale 'nope'"),
])
def test_a_bad_setting_is_refused_before_anything_runs(argv, message):
    with pytest.raises((KeyError, ValueError), match=message):
        PipelineOptions(argv).view_as(FlywheelOptions).run_config()


def test_run_help_and_the_reference_list_what_the_registries_hold():
    # Both sides in fresh processes: other test modules register test-only entries in this one.
    # The generated reference (docs/CONFIG.md) must be current, so it is checked here too.
    # One fresh process for the registries' names and the reference, one for the command itself.
    fresh = subprocess.run([sys.executable, "-c", (
        "from flywheel.sandbox import available_backends as b; "
        "from flywheel.trainer.credit import ADVANTAGES as a; "
        "from flywheel.policy.backends import POLICIES as p; "
        "from flywheel.loop.config_reference import reference; "
        "print('|'.join(', '.join(n) for n in (a.names(), p.names(), b()))); "
        "print(reference(), end='')")],
        capture_output=True, text=True, check=True).stdout
    listed, reference = fresh.split("\n", 1)
    listed = listed.split("|")
    out = subprocess.run(["flywheel", "run", "--help"], capture_output=True, text=True, check=True)
    text = " ".join(out.stdout.split())
    assert len(listed) == 3 and listed[2] in text  # every sandbox backend, in one list
    policies = listed[1].split(", ")  # those that learn and the model-free ones, in two lists
    assert policies and all(name in text for name in policies) and "model-free" in text
    assert listed[0] in reference  # every key's meaning and default, the estimators among them
    assert reference == (Path(__file__).resolve().parents[2] / "docs" / "CONFIG.md").read_text(), \
        "docs/CONFIG.md is stale: python -m flywheel.loop.config_reference > docs/CONFIG.md"
    assert "local" in listed[2] and "grpo" in listed[0] and "tiny" in listed[1]


def test_the_rollout_is_one_composite_of_named_steps(tmp_path):
    pipeline = beam.Pipeline(options=PipelineOptions([]))
    _ = pipeline | "Rollout" >> Rollout(tiny_config(), IterationSpec("r", 0, 0, None),
                                        RunLayout(str(tmp_path)))
    labels = set()

    class Labels(beam.pipeline.PipelineVisitor):
        def enter_composite_transform(self, node):
            labels.add(node.full_label)

        def visit_transform(self, node):
            labels.add(node.full_label)

    pipeline.visit(Labels())
    steps = ["ReadTasks", "ExpandTrain", "ExpandHeldout", "Generate", "Execute", "Verify",
             "NormalizeRewards", "FilterTrajectories", "WriteTrajectories", "WriteMetrics",
             "WriteErrors"]
    assert {f"Rollout/{step}" for step in steps} <= labels
