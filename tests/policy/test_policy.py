"""Every policy backend, through the registry only, keeps the Policy protocol's promises."""

import json

import pytest
import torch

from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.policy.backends import POLICIES, create_policy
from flywheel.policy.policy import Policy
from flywheel.trainer.trajectory_batches import make_batch
from flywheel.policy.rollout_engine import engine_for

# backend -> small options; a new backend adds its row here.
BACKENDS = [("tiny", {"d_model": 32, "n_layers": 2, "context": 24})]
TEXTS = ["17+5=", "rev:abcd=", "9="]


def _rows(samples, prompts, temps):
    return [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                 advantage=1.0, sampling_temperature=t) for p, s, t in zip(prompts, samples, temps)]


def _scored(policy, batch):
    with torch.no_grad():
        return policy.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"])


@pytest.mark.parametrize("backend, options", BACKENDS)
def test_create_sample_score_save_load(tmp_path, backend, options):
    policy = create_policy(backend, options, seed=0)
    assert isinstance(policy, Policy)
    policy.module.eval()
    prompts = [policy.encode_prompt(t) for t in TEXTS]
    temps = [1.0, 0.0, 1.3]
    samples = engine_for(policy, local=True).sample(prompts, temps, seeds=[1, 2, 3], max_new_tokens=8)
    for p, s in zip(prompts, samples):
        assert 0 < len(s.token_ids) == len(s.logprobs) <= 8
        assert len(p) + len(s.token_ids) <= policy.context
        assert (s.finish_reason == "stop") == (s.token_ids[-1] in policy.eos_ids)
    assert policy.encode_response("ab")[-1] in policy.eos_ids
    assert policy.decode(policy.encode_response("ab")) == "ab"

    # The trainer's scoring of the sampled ids is the sampler's distribution.
    batch = make_batch(_rows(samples, prompts, temps), policy.pad_id)
    scored = _scored(policy, batch)
    assert scored.shape == batch["response_mask"].shape
    mask = batch["response_mask"].bool()
    torch.testing.assert_close(scored[mask], batch["old_logprobs"][mask], atol=1e-5, rtol=0)

    uri = str(tmp_path / "ckpt")
    save_checkpoint(uri, policy, None, {"policy_version": 0})
    assert json.loads((tmp_path / "ckpt" / "config.json").read_text())["backend"] == backend
    loaded = load_checkpoint(uri).policy
    assert type(loaded) is type(policy) and loaded.context == policy.context
    loaded.module.eval()
    assert torch.equal(_scored(loaded, batch), scored)  # the same weights give the same logits
    again = engine_for(loaded, local=True).sample(prompts, temps, seeds=[1, 2, 3], max_new_tokens=8)
    assert [s.token_ids for s in again] == [s.token_ids for s in samples]


def test_an_unknown_backend_names_the_known_ones():
    with pytest.raises(KeyError, match="tiny"):
        create_policy("no-such-backend", {}, seed=0)
    with pytest.raises(ValueError, match="d_model"):
        create_policy("tiny", {"no_such_option": 1}, seed=0)
    assert "tiny" in POLICIES.names()
