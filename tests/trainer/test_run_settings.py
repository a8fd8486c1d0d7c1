"""The run settings that pick the algorithm (advantage, credit, discount, loss, aggregation) and the
KL term parse into their tables, and bad names are refused."""
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.loop.options import FlywheelOptions
from flywheel.trainer.algorithm import Algorithm


def test_the_algorithm_flags_fill_one_table():
    config, explicit = PipelineOptions([
        "--loss", "dapo", "--kl-coef", "0.05", "--advantage", "rloo", "--credit", "turn",
        "--turn-discount", "0.9", "--aggregation", "seq-mean-token-mean"]).view_as(
        FlywheelOptions).run_config()
    assert config.algorithm == Algorithm("rloo", "turn", 0.9, "dapo", "seq-mean-token-mean")
    assert config.train.kl_coef == 0.05
    assert explicit == {"algorithm.loss", "algorithm.advantage", "algorithm.credit",
                        "algorithm.discount", "algorithm.aggregation", "train.kl_coef"}


@pytest.mark.parametrize("argv, message", [
    (["--loss", "ppo2"], "unknown loss 'ppo2'.*gspo"),
    (["--credit", "token"], "unknown credit 'token'.*outcome, turn"),
    (["--aggregation", "mean"], "unknown loss aggregation 'mean'.*seq-mean-token-mean"),
])
def test_an_unknown_name_is_refused_naming_the_known(argv, message):
    with pytest.raises(KeyError, match=message):
        PipelineOptions(argv).view_as(FlywheelOptions).run_config()


def test_model_is_the_backends_model_option():
    config, _ = PipelineOptions(["--policy", "hf", "--model", "smollm2", "--policy-options",
                                 "top_p=0.9"]).view_as(FlywheelOptions).run_config()
    assert config.policy.parsed_options() == {"model": "smollm2", "top_p": "0.9"}
    with pytest.raises(ValueError, match="disagree"):
        PipelineOptions(["--policy", "hf", "--model", "a", "--policy-options", "model=b"]).view_as(
            FlywheelOptions).run_config()


def test_a_pretrained_policy_skips_the_warm_start_unless_asked():
    from flywheel.loop.driver import pretrained_skips_warm_start

    def settings(argv):
        return PipelineOptions(argv).view_as(FlywheelOptions).run_config()

    hf, explicit = settings(["--policy", "hf", "--model", "tiny-llama"])
    assert pretrained_skips_warm_start(hf, explicit).warm_start.max_steps == 0
    asked, explicit = settings(["--policy", "hf", "--warm-start-max-steps", "40"])
    assert pretrained_skips_warm_start(asked, explicit).warm_start.max_steps == 40
    tiny, explicit = settings([])
    assert pretrained_skips_warm_start(tiny, explicit).warm_start.max_steps == 3000
