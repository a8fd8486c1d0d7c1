"""The checkpoint digest of hf policies, plain and LoRA: a saved checkpoint loads back to the digest
it recorded (so workers and the trainer agree on it), and a trained adapter is another digest."""
import pytest
import torch

from flywheel.policy.checkpoint import load_checkpoint, policy_digest, save_checkpoint
from flywheel.policy.backends import create_policy


@pytest.mark.parametrize("lora_r", [0, 4])
def test_save_load_keeps_the_digest_and_a_step_changes_it(tiny_model_dir, tmp_path, lora_r):
    options = {"model": str(tiny_model_dir), **({"lora_r": lora_r} if lora_r else {})}
    policy = create_policy("hf", options, seed=0)
    fresh = policy_digest(policy)
    assert save_checkpoint(str(tmp_path / "ck0"), policy, None, {}) == fresh
    assert load_checkpoint(str(tmp_path / "ck0")).digest == fresh

    trainable = [p for p in policy.module.parameters() if p.requires_grad]
    with torch.no_grad():  # stands in for an optimizer step on what the backend trains
        trainable[-1].add_(1e-3)
    stepped = save_checkpoint(str(tmp_path / "ck1"), policy, None, {})
    assert stepped != fresh and load_checkpoint(str(tmp_path / "ck1")).digest == stepped
