"""The `hf` backend's options: which model, and how it samples (KEY=VALUE settings of the run).

    flywheel run --policy hf --policy-options model=DIR,top_p=0.95,stop=</answer>
    flywheel run --policy hf --policy-options model=DIR,engine=vllm   # sample with vLLM

A checkpoint stores the sampling options beside the weights, so an iteration samples the way
the run asked whatever process loads it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class HFOptions:
    model: str = "tiny-llama"      # a local directory or .gguf file, a URI (gs://...), or a named model
    system_prompt: str = ""        # sent as the system message before each prompt ("" = none)
    chat_template: bool = True     # False: the prompt is the raw text (the model has no template)
    top_p: float = 1.0             # nucleus sampling; logprobs stay those of the full tempered distribution
    max_new_tokens: int = 0        # caps each attempt's own budget (0: the domain's budget)
    stop: str = ""                 # stop strings, separated by "|"; a response ends once one appears
    context: int = 2048            # most tokens per sequence (capped by the model's positions)
    dtype: str = "float32"         # weights' dtype: float32, bfloat16 or float16
    logprob_chunk: int = 0         # positions per chunk of token_logprobs; 0: sized by a memory budget
    gradient_checkpointing: bool = False  # recompute each layer in backward: less memory, ~1.3x time
    lora_r: int = 0                # > 0: train a LoRA adapter of this rank (peft), the base frozen
    lora_alpha: float = 0.0        # LoRA scale numerator; 0: 2 x lora_r
    lora_targets: str = "q_proj|k_proj|v_proj|o_proj"  # module names, "|"-separated, or all-linear
    engine: str = "hf"             # who samples: hf (sampling.py) or vllm (vllm_engine.py, an extra)
    vllm_gpu_memory: float = 0.5   # engine=vllm on a GPU: the fraction of its memory vLLM may take

    def __post_init__(self):
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.lora_r < 0:
            raise ValueError(f"lora_r must be >= 0, got {self.lora_r}")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be float32, bfloat16 or float16, got {self.dtype!r}")
        if self.engine not in ("hf", "vllm"):
            raise ValueError(f"engine must be hf or vllm, got {self.engine!r}")
        if self.engine == "vllm" and self.top_p < 1:
            raise ValueError("engine=vllm samples with top_p=1 only: vLLM's logprobs under top-p "
                             "are of the renormalized nucleus, not what the trainer scores")

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return tuple(s for s in self.stop.split("|") if s)

    def lora_config(self):
        """peft's LoraConfig for these options (dropout off: old and new logprobs must compare
        one function)."""
        from peft import LoraConfig
        targets = self.lora_targets if self.lora_targets == "all-linear" else \
            [t for t in self.lora_targets.split("|") if t]
        return LoraConfig(r=self.lora_r, lora_alpha=self.lora_alpha or 2 * self.lora_r,
                          target_modules=targets, lora_dropout=0.0, task_type="CAUSAL_LM")

    def sampling(self) -> dict:
        """Everything but the model's location: what a checkpoint keeps for the next loader."""
        return {k: v for k, v in asdict(self).items() if k != "model"}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> HFOptions:
        """From the run's options (strings where the CLI gave strings) or a checkpoint's config;
        an unknown key is an error naming the known ones."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"unknown hf policy option(s) {unknown}; known: {', '.join(known)}")
        kinds = {"str": str, "bool": _bool, "float": float, "int": int}
        return cls(**{k: kinds[known[k].type](v) for k, v in d.items()})


def _bool(v: object) -> bool:
    if isinstance(v, str):
        if v.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"expected true or false, got {v!r}")
        return v.lower() in ("true", "1")
    return bool(v)
