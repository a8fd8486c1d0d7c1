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


def test_a_pretrained_policy_skips_the_warm_start_unless_asked():
    from flywheel.pipelines.driver import pretrained_skips_warm_start

    def settings(argv):
        return PipelineOptions(argv).view_as(FlywheelOptions).run_config()

    hf, explicit = settings(["--policy", "hf", "--model", "tiny-llama"])
    assert pretrained_skips_warm_start(hf, explicit).warm_start.max_steps == 0
    asked, explicit = settings(["--policy", "hf", "--warm-start-max-steps", "40"])
    assert pretrained_skips_warm_start(asked, explicit).warm_start.max_steps == 40
    tiny, explicit = settings([])
    assert pretrained_skips_warm_start(tiny, explicit).warm_start.max_steps == 3000
