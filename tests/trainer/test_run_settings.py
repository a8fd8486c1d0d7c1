"""The run settings that pick the trainer's loss and KL term parse, and bad names are refused."""
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.pipelines.options import FlywheelOptions


def test_loss_and_kl_coef_are_run_settings():
    config, explicit = PipelineOptions(["--loss", "dapo", "--kl-coef", "0.05"]).view_as(
        FlywheelOptions).run_config()
    assert config.train.loss == "dapo" and config.train.kl_coef == 0.05
    assert explicit == {"train.loss", "train.kl_coef"}


def test_an_unknown_loss_is_refused_naming_the_known():
    with pytest.raises(KeyError, match="unknown loss 'ppo2'.*gspo"):
        PipelineOptions(["--loss", "ppo2"]).view_as(FlywheelOptions).run_config()


def test_model_is_the_backends_model_option():
    config, _ = PipelineOptions(["--policy", "hf", "--model", "smollm2", "--policy-options",
                                 "top_p=0.9"]).view_as(FlywheelOptions).run_config()
    assert config.policy.parsed_options() == {"model": "smollm2", "top_p": "0.9"}
    with pytest.raises(ValueError, match="disagree"):
        PipelineOptions(["--policy", "hf", "--model", "a", "--policy-options", "model=b"]).view_as(
            FlywheelOptions).run_config()
