"""The rollout engine registry and the in-process engines, which sample from the checkpoint's
policy object (a policy never samples itself): weights are named by their checkpoint digest, so
the same digest loads nothing."""

import pytest

from flywheel.policy.checkpoint import Checkpoint, policy_digest
from flywheel.policy.backends import create_policy
from flywheel.policy.backends.tiny.sampling import TinyEngine, sample
from flywheel.policy.rollout_engine import (ENGINES, InProcessEngine, RolloutEngine, create_engine,
                                            engine_for)


def weights(policy) -> Checkpoint:
    return Checkpoint(policy, None, {}, policy_digest(policy))


def test_engines_are_found_by_name():
    assert {"tiny", "hf", "model-free", "vllm"} <= set(ENGINES.names())
    for name in ("tiny", "hf", "model-free"):
        assert isinstance(create_engine(name), RolloutEngine)
    with pytest.raises(KeyError, match="hf"):
        create_engine("no-such-engine")


def test_the_same_digest_loads_nothing_and_new_weights_replace_the_old():
    policy = create_policy("tiny", {}, seed=0)
    policy.module.eval()
    engine = create_engine(policy.engine)
    assert isinstance(engine, TinyEngine) and isinstance(engine, InProcessEngine)
    with pytest.raises(RuntimeError, match="no weights"):
        engine.sample([[1, 2]], [1.0], [0], 4)
    assert engine.update_weights(weights(policy))
    twin = create_policy("tiny", {}, seed=0)  # another object, the same weights
    assert not engine.update_weights(weights(twin))
    assert engine.policy is policy and engine.weight_loads == 1 and engine.starts == 1

    prompts = [policy.encode_prompt(q) for q in ("12+5=", "rev:abc=")]
    drawn = engine.sample(prompts, [1.0, 0.0], [3, 4], 8)
    assert drawn == sample(policy.module, prompts, [1.0, 0.0], [3, 4], 8)  # the tiny sampler

    other = create_policy("tiny", {}, seed=1)
    other.module.eval()
    assert engine.update_weights(weights(other))
    assert engine.policy is other and engine.weight_loads == 2
    assert engine.sample(prompts, [1.0, 0.0], [3, 4], 8) == \
        engine_for(other).sample(prompts, [1.0, 0.0], [3, 4], 8)
    engine.close()
    assert engine.digest is None


def test_chat_pieces_have_declared_defaults():
    """A backend without its own tool prompt or observation framing gets PolicyDefaults'."""
    policy = create_policy("standin", {}, seed=0)
    assert policy.encode_tool_prompt("1+1=", [{"name": "run"}]) == policy.encode_prompt("1+1=")
    ids = policy.encode_observation("ok")
    assert ids == policy.encode_response("ok")[:-1] and policy.engine == "model-free"
    assert create_policy("tiny", {}, seed=0).engine == "tiny"
