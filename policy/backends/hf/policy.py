"""The `hf` backend: any Hugging Face causal LM (AutoModelForCausalLM + AutoTokenizer) behind the
Policy protocol.

    flywheel run --policy hf --policy-options model=/models/my-llama
    flywheel run --policy hf --policy-options model=gs://bucket/models/my-llama,top_p=0.95
    flywheel run --policy hf --policy-options model=smollm2
    flywheel run --policy hf --policy-options model=/models/my-llama,engine=vllm

A checkpoint holds the model and tokenizer in Hugging Face format (save_pretrained into the
subfolder `hf/`, since config.json belongs to the checkpoint; with LoRA, `lora_r=16`, the
frozen base there and the peft adapter alone in `hf-adapter/`); its config.json keeps the
options. `transformers` is imported on first use, so listing backends stays cheap. With
`engine=vllm` rollout samples through vLLM (vllm_engine.py's rollout engine) and the policy trains
as it always does; its own `sample` is the hf sampler.
"""
from __future__ import annotations

import contextlib
import io
import os
import tempfile
import types
from collections.abc import Mapping, Sequence

import torch

from flywheel.policy.checkpoint import state_digest
from flywheel.schemas.storage import join, relative_uri, resolve
from flywheel.policy.backends import POLICIES
from flywheel.policy.backends.hf import chat_turns, logprobs
from flywheel.policy.backends.hf.model_files import (
    dequantized,
    is_remote,
    local_path,
    model_location,
    upload_dir,
)
from flywheel.policy.backends.hf.named_models import NAMED_MODELS
from flywheel.policy.backends.hf.options import HFOptions
from flywheel.policy.policy import PolicyDefaults, message_text

SUBFOLDER, ADAPTER = "hf", "hf-adapter"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@POLICIES.register("hf")
class HFPolicy(PolicyDefaults):
    """A transformers causal LM and its tokenizer; options are HFOptions' fields."""

    pretrained = True  # the run skips the supervised warm start unless it is asked for
    local_engine = "hf"  # its batched sampler in this process (hf/sampling.py HFEngine)
    # token_logprobs runs the body and the head, never the root's forward (logprobs.py)
    fsdp_forward_methods = ("flywheel_token_logprobs",)

    def __init__(self, model, tokenizer, options: HFOptions):
        """`model` is the causal LM, or with LoRA its peft wrapper (then `module`, whose
        trainable parameters are the adapter's); `causal_lm` is the network either way."""
        self.module, self.tokenizer, self.options = model, tokenizer, options
        self.causal_lm = _causal_lm(model)
        # A method of the module itself, so that FSDP can register it as a forward and a deep
        # copy (the proximal policy) scores with the copy's weights.
        model.flywheel_token_logprobs = types.MethodType(_module_token_logprobs, model)
        for m in model.modules():  # the ratio of new to old log-probs must compare one function
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        lm = self.causal_lm
        if options.gradient_checkpointing:  # applies in train() mode only, as transformers does
            lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        ids = [tokenizer.eos_token_id, *_as_list(getattr(lm.generation_config, "eos_token_id", None))]
        # The tokenizer's own EOS first: it ends demonstrations (encode_response).
        self.eos_ids = tuple(dict.fromkeys(int(i) for i in ids if i is not None))
        if not self.eos_ids:
            raise ValueError("the tokenizer and generation config name no EOS token")
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0])
        positions = getattr(lm.config, "max_position_embeddings", None) or options.context
        self.context = min(options.context, int(positions))
        self._base: tuple[str, str] | None = None  # LoRA: (where the frozen base is, its digest)

    @classmethod
    def create(cls, options: Mapping[str, object], seed: int,
               device: str | torch.device = "cpu") -> HFPolicy:
        """The pretrained model named by options["model"]; the seed draws only a LoRA adapter's
        initial A matrices (the weights are the model's; sampling takes a seed per row)."""
        opts = HFOptions.from_dict(options)
        source = NAMED_MODELS.get(opts.model)() if opts.model in NAMED_MODELS else opts.model
        directory, gguf = model_location(local_path(source))
        model, tokenizer = _from_pretrained(directory, gguf, opts.dtype, device)
        if opts.lora_r:
            from peft import get_peft_model
            torch.manual_seed(seed)  # the adapter's A matrices are random (B starts at zero)
            model = get_peft_model(model, opts.lora_config())
        return cls(model, tokenizer, opts)

    def save(self, uri: str) -> dict:
        """The model and tokenizer into hf/ (with LoRA: the frozen base there, the adapter alone
        in hf-adapter/), each a folder transformers or peft loads as it is.

        With LoRA the base never changes, so it is written once: a later checkpoint of the same
        policy whose base has the same digest points at the folder that holds it (`files`, a
        path relative to `uri`, e.g. "../initial/hf") and writes only its adapter (megabytes
        instead of the whole model each iteration). The checkpoint's digest still covers base
        and adapter, so a base that changed after it was written is refused at load."""
        files, extra = SUBFOLDER, {}
        if self.options.lora_r:
            digest = state_digest(self._base_state())
            extra = {"adapter": ADAPTER, "base_digest": digest}
            shared = self._base is not None and self._base[1] == digest
            relative = relative_uri(self._base[0], uri) if shared else None
            if relative is not None and relative.startswith("../") and relative.count("..") == 1:
                files = relative  # a sibling checkpoint's (of this run), never another run's
            else:
                self._write(uri, SUBFOLDER, self._save_base)
                self._base = (resolve(uri, SUBFOLDER), digest)
            self._write(uri, ADAPTER, self.module.save_pretrained)
        else:
            self._write(uri, SUBFOLDER, self._save_base)
        return {"options": {"model": self.options.model, **self.options.sampling()},
                "files": files, **extra}

    @staticmethod
    def _write(uri: str, folder: str, save) -> None:
        if is_remote(uri):
            with tempfile.TemporaryDirectory() as tmp:
                save(tmp)
                upload_dir(tmp, join(uri, folder))
        else:
            save(os.path.join(local_path(uri), folder))

    def _base_state(self) -> dict | None:
        """With LoRA, the base's own weights under their own names (None: the whole model)."""
        if not self.options.lora_r:
            return None
        return {k.replace(".base_layer.", "."): v for k, v in self.causal_lm.state_dict().items()
                if "lora_" not in k}

    def _save_base(self, directory: str) -> None:
        self.causal_lm.save_pretrained(directory, state_dict=self._base_state())
        self.tokenizer.save_pretrained(directory)

    def export(self, directory: str) -> None:
        """One plain Hugging Face model folder (a LoRA adapter merged into a copy of the base),
        that transformers and vLLM load without peft or Flywheel."""
        model = self.module
        if self.options.lora_r:
            import copy
            model = copy.deepcopy(self.module).merge_and_unload()
        model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)

    @classmethod
    def load(cls, uri: str, saved: Mapping, device: str | torch.device = "cpu") -> HFPolicy:
        opts = HFOptions.from_dict(saved["options"])
        base = resolve(uri, saved["files"])  # hf/, or a LoRA run's shared base (save)
        directory = local_path(base)
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"checkpoint {uri}: its model folder {base} is missing")
        model, tokenizer = _from_pretrained(directory, None, opts.dtype, device)
        if saved.get("adapter"):
            from peft import PeftModel
            model = PeftModel.from_pretrained(model, local_path(join(uri, saved["adapter"])),
                                              is_trainable=True).to(device)
        policy = cls(model, tokenizer, opts)
        if saved.get("adapter") and saved.get("base_digest"):
            policy._base = (base, saved["base_digest"])
        return policy

    def encode_prompt(self, text: str) -> list[int]:
        """The chat template over [system prompt,] user text, ending in the assistant's turn;
        without a template (or with chat_template=false), the text with the tokenizer's specials."""
        tok = self.tokenizer
        if self.options.chat_template and tok.chat_template:
            messages = [{"role": "user", "content": text}]
            if self.options.system_prompt:
                messages.insert(0, {"role": "system", "content": self.options.system_prompt})
            rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            ids = tok(rendered, add_special_tokens=False)["input_ids"]
        else:
            ids = tok(text)["input_ids"]
        return ids or [tok.bos_token_id if tok.bos_token_id is not None else self.eos_ids[0]]

    def encode_messages(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        """A conversation through the chat template (the run's system prompt first when the
        messages bring none; tools and tool calls as chat_turns.conversation_prompt shows them),
        ending in the assistant's turn; without a template, the texts."""
        tok = self.tokenizer
        if not (self.options.chat_template and tok.chat_template):
            return super().encode_messages(messages, tools)
        rendered = chat_turns.conversation_prompt(tok, messages, tools, message_text,
                                                  self.options.system_prompt)
        return tok(rendered, add_special_tokens=False)["input_ids"] or [self.eos_ids[0]]

    def encode_tool_prompt(self, text: str, tools: list[dict]) -> list[int]:
        """An episode's first prompt: the chat template with the tools (chat_turns.py)."""
        if not (self.options.chat_template and self.tokenizer.chat_template):
            return self.encode_prompt(text)
        rendered = chat_turns.tool_prompt(self.tokenizer, text, tools, self.options.system_prompt)
        return self.tokenizer(rendered, add_special_tokens=False)["input_ids"]

    def encode_observation(self, text: str) -> list[int]:
        """A tool's result between two of the model's turns, as the chat template frames it."""
        if not (self.options.chat_template and self.tokenizer.chat_template):
            return self.tokenizer("\n" + text + "\n", add_special_tokens=False,
                                  split_special_tokens=True)["input_ids"]
        eos = self.tokenizer.convert_ids_to_tokens(self.eos_ids[0])
        return chat_turns.observation_ids(self.tokenizer, text, eos)

    def encode_response(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.eos_ids[0]]

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        ends = [k for k, i in enumerate(ids) if i in self.eos_ids]
        return self.tokenizer.decode(ids[: ends[0]] if ends else ids, skip_special_tokens=True)

    @property
    def engine(self) -> str:
        """The rollout engine the options name: hf (the in-process sampler) or vllm."""
        return self.options.engine

    def token_logprobs(self, input_ids: torch.Tensor, attn_mask: torch.Tensor,
                       temperatures: torch.Tensor, score_from: int = 0) -> torch.Tensor:
        return self.module.flywheel_token_logprobs(input_ids, attn_mask, temperatures,
                                                   self.options.logprob_chunk, score_from)


def _module_token_logprobs(module, input_ids, attn_mask, temperatures, chunk, score_from):
    """logprobs.token_logprobs of `module`, the causal LM or its peft wrapper."""
    return logprobs.token_logprobs(_causal_lm(module), input_ids, attn_mask, temperatures,
                                   chunk=chunk, score_from=score_from)


def _causal_lm(module):
    """The causal LM inside `module`: the peft wrapper's base model (LoRA), else `module`."""
    try:
        from peft import PeftModel
    except ImportError:  # no peft: no LoRA either
        return module
    return module.get_base_model() if isinstance(module, PeftModel) else module


def _as_list(x) -> list:
    return [] if x is None else list(x) if isinstance(x, (list, tuple)) else [x]


@contextlib.contextmanager
def _quiet(gguf: str | None):
    """The GGUF reader draws a tqdm bar that transformers' switch does not reach (and tqdm reads
    TQDM_DISABLE only when imported): send its stderr elsewhere while a GGUF file loads."""
    if not gguf:
        yield
        return
    with contextlib.redirect_stderr(io.StringIO()):
        yield


def _from_pretrained(directory: str, gguf: str | None, dtype: str, device):
    """(model, tokenizer) from local files only; a GGUF model is read from its dequantized copy
    in the model cache (model_files.dequantized), made on first use."""
    try:
        import transformers
    except ImportError as e:
        raise ImportError("the hf policy backend needs the hf extra: pip install 'flywheel[hf]'") from e
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    if gguf:  # dequantized once per machine, then a plain folder (a GGUF parse is ~20 s)
        directory = dequantized(directory, gguf, dtype, lambda: _from_gguf(directory, gguf, dtype))
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=DTYPES[dtype],
                                                              local_files_only=True)
    return model.to(device), tokenizer


def _from_gguf(directory: str, gguf: str, dtype: str):
    """(model, tokenizer) read from the GGUF file itself, the model left without its quantizer,
    so that it trains and saves as a plain model."""
    import transformers
    with _quiet(gguf):
        tokenizer = transformers.AutoTokenizer.from_pretrained(directory, gguf_file=gguf,
                                                               local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            directory, gguf_file=gguf, dtype=DTYPES[dtype], local_files_only=True)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model, tokenizer
