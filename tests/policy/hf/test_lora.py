"""LoRA through peft (`lora_r` > 0): only the adapter trains; checkpoints keep the untouched base
in hf/ and the adapter in hf-adapter/, and load back to the same logits."""
import copy

import pytest
import torch

from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.trainer.train_step import TrainConfig, train_on_rows
from flywheel.trainer.trajectory_batches import make_batch
from flywheel.policy.rollout_engine import engine_for

TEXTS = ["What is 17 + 5?", "rev:abcd=", "from 3 to 9:"]


def _rows(policy):
    prompts = [policy.encode_prompt(t) for t in TEXTS for _ in range(2)]
    samples = engine_for(policy, local=True).sample(prompts, [1.0] * 6, seeds=list(range(6)), max_new_tokens=8)
    return [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                 advantage=1.0 if i % 2 else -1.0, sampling_temperature=1.0, filtered=False)
            for i, (p, s) in enumerate(zip(prompts, samples))]


def _scored(policy, rows):
    b = make_batch(rows, policy.pad_id)
    with torch.no_grad():
        return policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"]), b


def test_only_the_adapter_trains_and_a_checkpoint_round_trips(tiny_model_dir, tmp_path):
    base = create_policy("hf", {"model": str(tiny_model_dir)}, seed=0)
    policy = create_policy("hf", {"model": str(tiny_model_dir), "lora_r": 4}, seed=0)
    base.module.eval()
    policy.module.eval()
    rows = _rows(policy)
    lp, b = _scored(policy, rows)
    mask = b["response_mask"].bool()
    assert (lp[mask] - b["old_logprobs"][mask]).abs().max() < 1e-4  # sampler == trainer
    torch.testing.assert_close(lp, _scored(base, rows)[0])  # a fresh adapter changes nothing

    named = dict(policy.module.named_parameters())
    trainable = {n for n, p in named.items() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in named.items()}
    cfg = TrainConfig(epochs=1, minibatch_size=6, lr=1e-2)
    opt = build_optimizer(policy, **cfg.adamw())
    stats = train_on_rows(policy, opt, rows, cfg, seed=0)
    assert stats["n_steps"] == 1 and stats["grad_norm"] > 0
    moved = {n for n, p in policy.module.named_parameters() if not torch.equal(p, before[n])}
    assert moved and moved <= trainable  # the base is frozen
    assert any(n.endswith("lora_B.default.weight") for n in moved)

    policy.module.eval()
    uri = str(tmp_path / "ckpt")
    save_checkpoint(uri, policy, opt, {"policy_version": 1})
    assert (tmp_path / "ckpt" / "hf-adapter" / "adapter_config.json").exists()
    from transformers import AutoModelForCausalLM
    saved_base = AutoModelForCausalLM.from_pretrained(str(tmp_path / "ckpt" / "hf"))
    for name, p in base.module.state_dict().items():
        assert torch.equal(saved_base.state_dict()[name], p), name  # hf/ is the untouched base
    ck = load_checkpoint(uri)
    ck.policy.module.eval()
    assert torch.equal(_scored(ck.policy, rows)[0], _scored(policy, rows)[0])
    assert not torch.allclose(_scored(ck.policy, rows)[0], _scored(base, rows)[0])
    build_optimizer(ck.policy, **cfg.adamw()).load_state_dict(ck.optimizer_state)


def test_lora_options_are_checked(tiny_model_dir):
    with pytest.raises(ValueError, match="lora_r"):
        create_policy("hf", {"model": str(tiny_model_dir), "lora_r": -1}, seed=0)
    a = create_policy("hf", {"model": str(tiny_model_dir), "lora_r": 2, "lora_targets": "all-linear"}, 0)
    b = create_policy("hf", {"model": str(tiny_model_dir), "lora_r": 2, "lora_targets": "all-linear"}, 0)
    for (n, p), q in zip(a.module.named_parameters(), b.module.parameters()):
        assert torch.equal(p, q), n  # same options and seed, same adapter
    assert any("mlp" in n and "lora_A" in n for n, _ in a.module.named_parameters())
    assert copy.deepcopy(a).options.lora_r == 2


def test_export_merges_the_adapter_into_a_plain_model(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    policy = create_policy("hf", {"model": str(tiny_model_dir), "lora_r": 4}, seed=0)
    rows = _rows(policy)
    cfg = TrainConfig(epochs=1, minibatch_size=6, lr=1e-2)
    train_on_rows(policy, build_optimizer(policy, **cfg.adamw()), rows, cfg, seed=0)
    policy.module.eval()
    policy.export(str(tmp_path / "merged"))
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"))
    assert not any("lora" in n for n in merged.state_dict())
    b = make_batch(rows, policy.pad_id)
    with torch.no_grad():
        logits = merged(input_ids=b["input_ids"], attention_mask=b["attn_mask"].long()).logits
        ours = policy.causal_lm(input_ids=b["input_ids"], attention_mask=b["attn_mask"].long()).logits
    torch.testing.assert_close(logits, ours, atol=1e-5, rtol=1e-5)
    assert policy.options.lora_r and any("lora_" in n for n, _ in policy.module.named_parameters())


def test_later_lora_checkpoints_share_the_base_written_once(tiny_model_dir, tmp_path):
    """initial -> iteration=0 -> iteration=1, each a load, a step and a save as the driver does:
    only the first writes the base; the others hold their adapter and point at it, load to
    their own logits, and keep doing so after the run folder moves. A base changed after it
    was written is refused by the checkpoint digest."""
    from flywheel.policy.checkpoint import CheckpointDigestError
    checkpoints = tmp_path / "run" / "checkpoints"
    policy = create_policy("hf", {"model": str(tiny_model_dir), "lora_r": 4}, seed=0)
    rows = _rows(policy)
    save_checkpoint(str(checkpoints / "initial"), policy, None, {})
    scores, previous = {}, "initial"
    cfg = TrainConfig(epochs=1, minibatch_size=6, lr=1e-2)
    for k in (0, 1):
        ck = load_checkpoint(str(checkpoints / previous))
        opt = build_optimizer(ck.policy, **cfg.adamw())
        train_on_rows(ck.policy, opt, rows, cfg, seed=k)
        ck.policy.module.eval()
        previous = f"iteration={k}"
        save_checkpoint(str(checkpoints / previous), ck.policy, opt, {})
        scores[previous] = _scored(ck.policy, rows)[0]
        assert not (checkpoints / previous / "hf").exists()  # the adapter only
        assert (checkpoints / previous / "hf-adapter" / "adapter_config.json").exists()
    assert (checkpoints / "initial" / "hf" / "config.json").exists()
    assert not torch.equal(scores["iteration=0"], scores["iteration=1"])
    moved = tmp_path / "moved"
    (tmp_path / "run").rename(moved)
    for name, score in scores.items():
        ck = load_checkpoint(str(moved / "checkpoints" / name))
        ck.policy.module.eval()
        assert ck.policy.options.lora_r == 4
        torch.testing.assert_close(_scored(ck.policy, rows)[0], score, atol=1e-6, rtol=0)
    weights = moved / "checkpoints" / "initial" / "hf" / "model.safetensors"
    from safetensors.torch import load_file, save_file
    state = load_file(str(weights))
    name = next(n for n in state if n.endswith("mlp.down_proj.weight"))
    state[name] = state[name] * 2
    save_file(state, str(weights), metadata={"format": "pt"})
    with pytest.raises(CheckpointDigestError):
        load_checkpoint(str(moved / "checkpoints" / "iteration=1"))
