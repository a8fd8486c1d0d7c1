"""`tiny-llama`: a 2-layer Llama (hidden 64) with random weights and a real BPE tokenizer, built
offline in about a second, for tests, demos and the default `--policy hf` run.

The tokenizer is a byte-level BPE (512 ids) trained with the `tokenizers` library on a few KB
of generated text like the built-in domains' prompts, with ChatML specials and a chat template,
so it exercises everything a real model's does: multi-byte merges, special tokens, a template,
an EOS that ends the assistant's turn. Same seed, same files. `head_dim=32` builds the variant
vLLM's CPU attention accepts (it has kernels for head sizes 32 and up, not 16).
"""
from __future__ import annotations

import random
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2: pad, start, EOS
WORDS = ("the a of to and is what answer number sum reverse from expr rev list code python "
         "print return def if else for in with plus minus times result just").split()


def corpus(seed: int, lines: int = 400) -> list[str]:
    """Generated lines: arithmetic questions and answers, domain-like prompts, word salad."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        a, b = rng.randrange(1000), rng.randrange(1000)
        out.append(rng.choice([f"What is {a} + {b}? Answer with just the number. {a + b}",
                               f"{a}+{b}={a + b}", f"from {a} to {a + b}: {a + b // 2}",
                               f"expr {a}: {a}*1", "rev:" + "".join(rng.sample("abcdefghij", 5))]))
        out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 12))))
    return out


def build_tiny_llama(directory: str | Path, seed: int = 0, head_dim: int = 16) -> str:
    """Write the model and its tokenizer into `directory` (save_pretrained); returns it.
    `head_dim` is per attention head (16 = hidden size / heads, the default model)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from transformers.utils import logging

    logging.disable_progress_bar()

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus(seed), trainers.BpeTrainer(
        vocab_size=512, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(vocab_size=bpe.get_vocab_size(), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=head_dim,
                         max_position_embeddings=512, tie_word_embeddings=True, bos_token_id=None,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)
