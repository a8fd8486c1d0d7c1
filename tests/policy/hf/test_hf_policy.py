"""The hf backend keeps the Policy protocol's promises on a tiny random Llama (fp32, CPU)."""
import copy
import json

import pytest
import torch

from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.policy.policy import Policy
from flywheel.trainer.supervised import supervised_step
from flywheel.trainer.train_step import TrainConfig, train_on_rows
from flywheel.trainer.trajectory_batches import first_scored, make_batch
from flywheel.policy.rollout_engine import engine_for

TEXTS = ["What is 17 + 5?", "rev:abcd=", "from 3 to 9:"]


def _policy(model_dir, **options):
    policy = create_policy("hf", {"model": str(model_dir), **options}, seed=0)
    policy.module.eval()
    return policy


def _rows(policy, prompts, samples, temps, advantage=1.0):
    return [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                 advantage=advantage, sampling_temperature=t, filtered=False)
            for p, s, t in zip(prompts, samples, temps)]


def _scored(policy, batch):
    with torch.no_grad():
        return policy.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"])


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_sampled_logprobs_are_the_trainers_for_the_same_ids(tiny_model_dir, top_p):
    policy = _policy(tiny_model_dir, top_p=top_p)
    assert isinstance(policy, Policy)
    prompts = [policy.encode_prompt(t) for t in TEXTS]
    temps = [1.0, 0.0, 0.7]
    samples = engine_for(policy, local=True).sample(prompts, temps, seeds=[1, 2, 3], max_new_tokens=16)
    for s in samples:
        assert 0 < len(s.token_ids) == len(s.logprobs) <= 16
        assert all(isinstance(x, float) for x in s.logprobs)
    batch = make_batch(_rows(policy, prompts, samples, temps), policy.pad_id)
    scored = _scored(policy, batch)
    assert scored.dtype == torch.float32 and scored.shape == batch["response_mask"].shape
    mask = batch["response_mask"].bool()
    assert (scored[mask] - batch["old_logprobs"][mask]).abs().max() < 1e-4


def test_logprobs_in_chunks_and_from_the_responses_equal_one_pass_with_gradients(tiny_model_dir):
    """Chunked, or scoring only from the shortest prompt's end (score_from, what the trainer
    asks; rows of one prompt then share its prefix's keys and values): the same response
    log-probs and the same gradients as one pass over everything."""
    whole, chunked = _policy(tiny_model_dir), _policy(tiny_model_dir, logprob_chunk=3)
    prompts = [whole.encode_prompt(t) for t in TEXTS for _ in range(2)]  # groups of 2
    samples = engine_for(whole, local=True).sample(prompts, [1.0] * 6, seeds=[4, 5, 6, 7, 8, 9], max_new_tokens=10)
    rows = _rows(whole, prompts, samples, [1.0] * 6)
    batch = make_batch(rows, whole.pad_id)
    start = first_scored(rows)
    assert start == min(len(p) for p in prompts) - 1 > 0
    mask = batch["response_mask"]
    outs, embedded = [], []  # token positions the body ran, per call
    for policy in (whole, chunked):
        policy.causal_lm.model.embed_tokens.register_forward_hook(
            lambda _m, args, _out: embedded.append(args[0].numel()))
    for policy, score_from in ((whole, 0), (chunked, 0), (whole, start), (chunked, start)):
        policy.module.zero_grad(set_to_none=True)
        embedded.clear()
        lp = policy.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"],
                                   score_from=score_from)
        B, T = batch["input_ids"].shape
        assert sum(embedded) == (B * T if not score_from else 3 * (start + 1) + B * (T - start - 1))
        assert lp.shape == mask.shape
        if score_from:
            assert not lp[:, :score_from].any()
        (lp * mask).sum().backward()
        outs.append(((lp * mask).detach(), policy.module.model.embed_tokens.weight.grad.clone()))
    for lp, grad in outs[1:]:
        torch.testing.assert_close(outs[0][0], lp, atol=1e-6, rtol=0)
        torch.testing.assert_close(outs[0][1], grad, atol=1e-6, rtol=1e-5)


def test_same_seed_same_ids_and_a_row_does_not_depend_on_its_batch(tiny_model_dir):
    policy = _policy(tiny_model_dir)
    prompts = [policy.encode_prompt(t) for t in TEXTS]
    first = engine_for(policy, local=True).sample(prompts, [1.0] * 3, seeds=[7, 8, 9], max_new_tokens=12)
    again = engine_for(policy, local=True).sample(prompts, [1.0] * 3, seeds=[7, 8, 9], max_new_tokens=12)
    assert [s.token_ids for s in again] == [s.token_ids for s in first]
    assert [s.logprobs for s in again] == [s.logprobs for s in first]
    alone = engine_for(policy, local=True).sample(prompts[2:], [1.0], seeds=[9], max_new_tokens=12)[0]
    assert alone.token_ids == first[2].token_ids
    assert alone.logprobs == pytest.approx(first[2].logprobs, abs=1e-5)
    other = engine_for(policy, local=True).sample(prompts, [1.0] * 3, seeds=[70, 80, 90], max_new_tokens=12)
    assert [s.token_ids for s in other] != [s.token_ids for s in first]
    # A group (one prompt repeated, prefilled once): each row as if it were sampled alone.
    group = engine_for(policy, local=True).sample([prompts[2]] * 3 + prompts[:1], [1.0, 0.7, 1.0, 1.0],
                          seeds=[9, 9, 5, 7], max_new_tokens=12)
    assert group[0].token_ids == alone.token_ids
    assert group[0].logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    assert group[3].token_ids == first[0].token_ids
    for row, temp, seed in ((group[1], 0.7, 9), (group[2], 1.0, 5)):
        solo = engine_for(policy, local=True).sample(prompts[2:], [temp], seeds=[seed], max_new_tokens=12)[0]
        assert row.token_ids == solo.token_ids


def test_the_chat_template_is_applied(tiny_model_dir):
    policy = _policy(tiny_model_dir)
    tok = policy.tokenizer
    ids = policy.encode_prompt("What is 2 + 3?")
    assert tok.decode(ids) == "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    with_system = _policy(tiny_model_dir, system_prompt="Answer briefly.").encode_prompt("Hi")
    assert tok.decode(with_system).startswith("<|im_start|>system\nAnswer briefly.<|im_end|>\n"
                                              "<|im_start|>user\nHi<|im_end|>")
    raw = _policy(tiny_model_dir, chat_template=False).encode_prompt("What is 2 + 3?")
    assert tok.decode(raw) == "What is 2 + 3?"
    assert policy.encode_response("5")[-1] == tok.convert_tokens_to_ids("<|im_end|>")
    assert policy.eos_ids == (tok.convert_tokens_to_ids("<|im_end|>"),)
    assert policy.decode(policy.encode_response("héllo ✓") + [5, 6]) == "héllo ✓"


def test_eos_and_stop_strings_end_a_response(tiny_model_dir):
    policy = _policy(tiny_model_dir)
    prompt = policy.encode_prompt("rev:abcd=")
    answer = policy.encode_response("dcba then more")
    opt = build_optimizer(policy, **TrainConfig(lr=1e-2).adamw())
    for _ in range(60):  # teach the random model one answer, EOS included
        supervised_step(policy, opt, [prompt], [answer])
    policy.module.eval()
    greedy = engine_for(policy, local=True).sample([prompt], [0.0], seeds=[0], max_new_tokens=40)[0]
    assert greedy.finish_reason == "stop" and greedy.token_ids == answer
    assert policy.decode(greedy.token_ids) == "dcba then more"
    cut = engine_for(policy, local=True).sample([prompt] * 2, [0.0, 0.0], seeds=[0, 1], max_new_tokens=3)
    assert all(s.finish_reason == "length" and len(s.token_ids) == 3 for s in cut)
    policy.options = policy.options.__class__(**{**policy.options.__dict__, "stop": "zz|then"})
    stopped = engine_for(policy, local=True).sample([prompt], [0.0], seeds=[0], max_new_tokens=40)[0]
    assert stopped.finish_reason == "stop" and policy.decode(stopped.token_ids).endswith("then")
    assert stopped.token_ids == answer[: len(stopped.token_ids)] and len(stopped.token_ids) < len(answer)


def test_an_optimizer_step_changes_the_weights(tiny_model_dir):
    policy = _policy(tiny_model_dir)
    prompts = [policy.encode_prompt(t) for t in TEXTS for _ in range(2)]
    samples = engine_for(policy, local=True).sample(prompts, [1.0] * 6, seeds=list(range(6)), max_new_tokens=8)
    rows = _rows(policy, prompts, samples, [1.0] * 6)
    for i, r in enumerate(rows):
        r["advantage"] = 1.0 if i % 2 else -1.0
    before = copy.deepcopy(policy.module.state_dict())
    cfg = TrainConfig(epochs=1, minibatch_size=6, lr=1e-3)
    stats = train_on_rows(policy, build_optimizer(policy, **cfg.adamw()), rows, cfg, seed=0)
    assert stats["n_steps"] == 1 and torch.isfinite(torch.tensor(stats["loss"]))
    assert stats["grad_norm"] > 0 and stats["logprob_diff_max"] < 1e-4
    after = policy.module.state_dict()
    assert all(torch.isfinite(p).all() for p in after.values())
    assert [n for n in after if not torch.equal(after[n], before[n])], "no weight moved"


def test_save_then_load_gives_identical_logits(tiny_model_dir, tmp_path):
    policy = _policy(tiny_model_dir, top_p=0.9, system_prompt="Be brief.")
    opt = build_optimizer(policy, **TrainConfig().adamw())
    supervised_step(policy, opt, [policy.encode_prompt("ab")], [policy.encode_response("ba")])
    policy.module.eval()
    uri = str(tmp_path / "ckpt")
    save_checkpoint(uri, policy, opt, {"policy_version": 1})
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config["backend"] == "hf" and config["policy"]["options"]["top_p"] == 0.9
    assert (tmp_path / "ckpt" / "hf" / "config.json").exists()  # save_pretrained, in a subfolder
    assert (tmp_path / "ckpt" / "hf" / "tokenizer.json").exists()
    ck = load_checkpoint(uri)
    loaded = ck.policy
    loaded.module.eval()
    assert loaded.options == policy.options and loaded.eos_ids == policy.eos_ids
    prompts = [policy.encode_prompt(t) for t in TEXTS]
    assert [loaded.encode_prompt(t) for t in TEXTS] == prompts
    samples = engine_for(policy, local=True).sample(prompts, [1.0] * 3, seeds=[1, 2, 3], max_new_tokens=8)
    batch = make_batch(_rows(policy, prompts, samples, [1.0] * 3), policy.pad_id)
    assert torch.equal(_scored(loaded, batch), _scored(policy, batch))
    again = engine_for(loaded, local=True).sample(prompts, [1.0] * 3, seeds=[1, 2, 3], max_new_tokens=8)
    assert [s.token_ids for s in again] == [s.token_ids for s in samples]
    restored = build_optimizer(loaded, **TrainConfig().adamw())
    restored.load_state_dict(ck.optimizer_state)  # the optimizer state meets the loaded model


def test_bad_options_and_missing_models_are_clear_errors(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="unknown hf policy option.*'nope'.*top_p"):
        create_policy("hf", {"model": str(tiny_model_dir), "nope": 1}, seed=0)
    with pytest.raises(FileNotFoundError, match="no model at"):
        create_policy("hf", {"model": str(tmp_path / "nowhere")}, seed=0)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        create_policy("hf", {"model": str(tmp_path / "empty")}, seed=0)
    with pytest.raises(ValueError, match="top_p"):
        create_policy("hf", {"model": str(tiny_model_dir), "top_p": 0}, seed=0)


def test_gradient_checkpointing_gives_the_same_gradients(tiny_model_dir):
    plain, ckpt = _policy(tiny_model_dir), _policy(tiny_model_dir, gradient_checkpointing=True)
    prompts = [plain.encode_prompt(t) for t in TEXTS]
    samples = engine_for(plain, local=True).sample(prompts, [1.0] * 3, seeds=[4, 5, 6], max_new_tokens=10)
    batch = make_batch(_rows(plain, prompts, samples, [1.0] * 3), plain.pad_id)
    grads = []
    for policy in (plain, ckpt):
        policy.module.train()
        lp = policy.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"])
        (lp * batch["response_mask"]).sum().backward()
        grads.append({n: p.grad.clone() for n, p in policy.module.named_parameters()})
    assert ckpt.causal_lm.is_gradient_checkpointing and not plain.causal_lm.is_gradient_checkpointing
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, atol=1e-6, rtol=1e-5)


def test_greedy_ids_are_transformers_own_and_a_tiny_nucleus_is_greedy(tiny_model_dir):
    policy = _policy(tiny_model_dir)
    prompts = [policy.encode_prompt(t) for t in TEXTS]
    greedy = engine_for(policy, local=True).sample(prompts, [0.0] * 3, seeds=[1, 2, 3], max_new_tokens=12)
    for prompt, s in zip(prompts, greedy):
        with torch.no_grad():
            ref = policy.module.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=12,
                                         pad_token_id=policy.pad_id, eos_token_id=list(policy.eos_ids))
        assert s.token_ids == ref[0, len(prompt):].tolist()
    nucleus = _policy(tiny_model_dir, top_p=1e-6)  # only the most likely token is left to draw
    drawn = engine_for(nucleus, local=True).sample(prompts, [1.0] * 3, seeds=[1, 2, 3], max_new_tokens=12)
    assert [s.token_ids for s in drawn] == [s.token_ids for s in greedy]
    # ...while the recorded logprobs are those of the full tempered distribution (T = 1 here).
    assert [s.logprobs for s in drawn] == [s.logprobs for s in greedy]
