"""The built-in tiny policy backend (`tiny`): a byte-level transformer trainable on 2 CPU cores.

    policy.py     the backend: TinyPolicy, registered as "tiny"
    model.py      the network and its sampling distribution
    tokens.py     the byte tokenizer
    sampling.py   batched, row-reproducible sampling with a KV cache
"""
from flywheel.policy.backends.tiny.policy import TinyPolicy

__all__ = ["TinyPolicy"]
