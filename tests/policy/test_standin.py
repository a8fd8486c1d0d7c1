"""The `standin` policy backend (load tests without a model): seeded answers, logprobs the
trainer scores the same, a real optimizer step that moves its one parameter, a checkpoint."""

import json

import torch

from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.trainer.train_step import TrainConfig, train_on_rows
from flywheel.policy.rollout_engine import engine_for


def test_answers_are_seeded_and_scored_as_sampled(tmp_path):
    policy = create_policy("standin", {"mode": "digits"}, seed=0)
    prompts = [policy.encode_prompt("What is 2+2?")] * 3
    first = engine_for(policy, local=True).sample(prompts, [1.0] * 3, [1, 2, 1], 8)
    assert first[0] == first[2] and all(s.finish_reason == "stop" for s in first)
    assert policy.decode(first[0].token_ids).isdigit()
    ids = torch.tensor([prompts[0] + first[0].token_ids])
    scored = policy.token_logprobs(ids, ids != policy.pad_id, torch.ones(1))[0, len(prompts[0]) - 1:]
    assert scored.tolist() == first[0].logprobs
    fixed = create_policy("standin", {"mode": "fixed", "response": "1+1"}, seed=0)
    assert fixed.decode(engine_for(fixed, local=True).sample(prompts[:1], [0.0], [5], 8)[0].token_ids) == "1+1"


def test_a_train_step_moves_it_and_a_checkpoint_keeps_it(tmp_path):
    policy = create_policy("standin", {}, seed=0)
    prompt = policy.encode_prompt("q")
    rows = [{"prompt_token_ids": prompt, "response_token_ids": s.token_ids, "response_logprobs": s.logprobs,
             "advantage": a, "sampling_temperature": 1.0, "filtered": False}
            for s, a in zip(engine_for(policy, local=True).sample([prompt] * 2, [1.0] * 2, [1, 2], 8), (1.0, -0.5))]
    cfg = TrainConfig()
    train_on_rows(policy, build_optimizer(policy, **cfg.adamw()), rows, cfg, seed=0)
    moved = policy.module.bias.item()
    assert moved != 0.0
    save_checkpoint(str(tmp_path / "ckpt"), policy, None, {"iteration": 0})
    assert load_checkpoint(str(tmp_path / "ckpt")).policy.module.bias.item() == moved


def test_the_digest_names_the_answering_rule(tmp_path):
    """Two scripts (or two standin rules) give two digests, so a worker that keeps its engine
    while the digest holds never replays another run's script; a saved one loads to the same."""
    from flywheel.policy.checkpoint import policy_digest
    scripts = []
    for n, action in enumerate(("first", "second")):
        path = tmp_path / f"script{n}.jsonl"
        path.write_text(json.dumps({"prompt": "p", "actions": [action]}) + "\n")
        scripts.append(create_policy("scripted", {"script": str(path)}, 0))
    assert policy_digest(scripts[0]) != policy_digest(scripts[1])
    assert policy_digest(create_policy("standin", {"mode": "fixed", "response": "1"}, 0)) != \
        policy_digest(create_policy("standin", {"mode": "fixed", "response": "2"}, 0))
    save_checkpoint(str(tmp_path / "ck"), scripts[1], None, {})
    assert load_checkpoint(str(tmp_path / "ck")).digest == policy_digest(scripts[1])
