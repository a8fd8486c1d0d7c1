"""Supervised fine-tuning (trainer/supervised.py) and rejection-sampling data
(pipelines/sft_data.py): real optimizer steps that change the weights, no mocks."""
import pytest
import torch

from flywheel.pipelines.sft_data import domain_examples, run_examples, success_examples
from flywheel.schemas.write import write_partitioned
from flywheel.trainer.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.trainer.policies import create_policy
from flywheel.trainer.supervised import SFTConfig, as_rows, example, mean_loss, train_supervised
from flywheel.trainer.trajectory_batches import make_batch

PAIRS = [("3+4=", "7"), ("10+5=", "15"), ("2+2=", "4"), ("9+1=", "10"), ("6+6=", "12")]


def _examples(policy):
    return [example(policy.encode_prompt(q), policy.encode_response(a)) for q, a in PAIRS]


def _logits(policy, examples):
    b = make_batch(as_rows(examples), policy.pad_id)
    with torch.no_grad():
        return policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"])


def test_sft_lowers_the_loss_and_its_checkpoint_loads_back(tmp_path):
    policy = create_policy("tiny", {}, seed=0)
    examples = _examples(policy)
    before = mean_loss(policy, examples)
    cfg = SFTConfig(lr=3e-3, epochs=4, batch_tokens=40)
    opt = build_optimizer(policy, **cfg.adamw())
    seen = []
    history = train_supervised(policy, opt, examples, cfg, seed=0,
                               on_epoch=lambda epoch, stats: {"hook": epoch},
                               on_step=lambda epoch, done, loss: seen.append((epoch, done)))
    assert [h["epoch"] for h in history] == [1, 2, 3, 4] and [h["hook"] for h in history] == [1, 2, 3, 4]
    assert all(h["examples"] == 5 and h["tokens"] == sum(len(e["response_token_ids"]) for e in examples)
               for h in history)
    assert history[0]["steps"] > 1  # 40 padded tokens per step: several minibatches per epoch
    assert seen[-1] == (4, 5)
    after = mean_loss(policy, examples)
    assert after < before * 0.8 and history[-1]["loss"] < history[0]["loss"]

    uri = str(tmp_path / "sft")
    save_checkpoint(uri, policy, opt, {"sft": {"epochs": history}})
    loaded = load_checkpoint(uri)
    loaded.policy.module.eval()
    assert torch.equal(_logits(loaded.policy, examples), _logits(policy, examples))
    assert loaded.meta["sft"]["epochs"][-1]["loss"] == history[-1]["loss"]


def test_accumulation_and_seed_decide_the_update():
    """Microbatches of a minibatch add up to the same step; the same seed, the same weights."""
    results = []
    for micro in (0, 12, 0):
        policy = create_policy("tiny", {}, seed=0)
        cfg = SFTConfig(lr=1e-2, epochs=1, batch_tokens=1000, micro_tokens=micro)
        sgd = torch.optim.SGD(policy.module.parameters(), lr=0.1)  # linear in the gradient
        train_supervised(policy, sgd, _examples(policy), cfg, seed=1)
        results.append([p.detach().clone() for p in policy.module.parameters()])
    for a, b, c in zip(*results):
        torch.testing.assert_close(a, b)
        assert torch.equal(a, c)


def test_a_loss_mask_keeps_observation_tokens_out():
    policy = create_policy("tiny", {}, seed=0)
    prompt, response = policy.encode_prompt("1+1="), policy.encode_response("2 and 3")
    masked = example(prompt, response, [1, 1] + [0] * (len(response) - 2))
    cfg = SFTConfig(lr=1e-2, epochs=1)
    [stats] = train_supervised(policy, build_optimizer(policy, **cfg.adamw()), [masked], cfg, seed=0)
    assert stats["tokens"] == 2
    with pytest.raises(ValueError, match="loss mask"):
        example(prompt, response, [1])


def test_lora_sft_changes_only_the_adapter(tmp_path, monkeypatch):
    pytest.importorskip("peft")
    monkeypatch.setenv("FLYWHEEL_MODEL_CACHE", str(tmp_path / "models"))
    policy = create_policy("hf", {"model": "tiny-llama", "lora_r": 4}, seed=0)
    collected = domain_examples(policy, ["chat_arith"], 4, seed=0)
    assert len(collected.items) == 4 and not collected.skipped
    before = {n: p.detach().clone() for n, p in policy.module.named_parameters()}
    cfg = SFTConfig(lr=1e-2, epochs=1, batch_tokens=10_000)
    train_supervised(policy, build_optimizer(policy, **cfg.adamw()), collected.items, cfg, seed=0)
    moved = {n for n, p in policy.module.named_parameters() if not torch.equal(p, before[n])}
    assert moved and all("lora_" in n for n in moved)


def _trajectory(task_id, k, verdict, response, *, filtered=False, reward=1.0, mask=None):
    return {"run_id": "r", "iteration": 0, "domain": "chat_arith", "task_id": task_id,
            "group_id": f"0/train/{task_id}", "sample_index": k, "verdict": verdict,
            "filtered": filtered, "filter_reason": "exploit" if filtered else None,
            "reward_raw": reward, "prompt_token_ids": [5, 6, 7], "response_token_ids": response,
            "response_logprobs": [-1.0] * len(response), "response_mask": mask,
            "sampling_temperature": 1.0, "response": "x"}


def test_rejection_sampling_keeps_verified_successes_on_their_exact_ids(tmp_path):
    run = str(tmp_path / "run")
    rows = [_trajectory("t1", 0, "pass", [11, 12, 2]),
            _trajectory("t1", 1, "pass", [11, 12, 2]),            # the same response again
            _trajectory("t1", 2, "pass", [13, 2], reward=1.0),   # shorter: the best of t1
            _trajectory("t1", 3, "fail", [14, 2], reward=0.0),
            _trajectory("t2", 0, "pass", [15, 16, 2], filtered=True),
            _trajectory("t2", 1, "error", [17, 2], reward=0.0),
            _trajectory("t3", 0, "pass", [18, 30, 19, 2], mask=[1, 0, 1, 1])]
    write_partitioned(run, "trajectories", rows)
    got = run_examples(run)
    pairs = sorted((e["task_id"], tuple(e["response_token_ids"])) for e in got.items)
    assert pairs == [("t1", (11, 12, 2)), ("t1", (13, 2)), ("t3", (18, 30, 19, 2))]
    assert all(e["prompt_token_ids"] == [5, 6, 7] for e in got.items)
    assert next(e for e in got.items if e["task_id"] == "t3")["response_mask"] == [1, 0, 1, 1]
    assert got.skipped["the same response to the same task again"] == 1
    assert got.skipped["filtered (exploit)"] == 1
    best = run_examples(run, best_per_task=True)
    assert sorted(tuple(e["response_token_ids"]) for e in best.items) == [(13, 2), (18, 30, 19, 2)]
    every = success_examples(rows)  # rows as a rollout returns them, fails included
    assert every.skipped["verdict 'fail', not a verified success"] == 1
    with pytest.raises(ValueError, match="no trajectory with verdict 'pass'"):
        run_examples(str(tmp_path / "empty"))


def test_imported_examples_use_exact_ids_only_for_the_starting_weights(tmp_path):
    from flywheel.pipelines.sft_data import table_examples
    from flywheel.trainer.checkpoint import policy_digest
    policy = create_policy("tiny", {}, seed=0)
    digest = policy_digest(policy)
    folder = str(tmp_path / "imports")
    messages = '[{"role": "user", "content": "2+2="}]'
    write_partitioned(folder, "sft_examples", [
        {"example_id": "a", "messages": messages, "response": "4"},
        {"example_id": "b", "prompt": "3+3=", "response": "6", "prompt_token_ids": [1, 2],
         "response_token_ids": [3, 4], "token_source": digest},            # exact ids
        {"example_id": "c", "prompt": "3+3=", "response": "6", "prompt_token_ids": [1, 2],
         "response_token_ids": [3, 4], "token_source": "sha256:other"},    # another tokenizer's
        {"example_id": "d", "messages": "[{not json", "response": "x", "source_uri": "chat.jsonl",
         "source_line": 7},
        {"example_id": "e", "prompt": "5+5="}])                            # no response
    got = table_examples(policy, folder, digest)
    assert [(e["prompt_token_ids"], e["response_token_ids"]) for e in got.items] == [
        (policy.encode_messages([{"role": "user", "content": "2+2="}]), policy.encode_response("4")),
        ([1, 2], [3, 4]),
        (policy.encode_prompt("3+3="), policy.encode_response("6"))]
    assert sum(got.skipped.values()) == 2
    assert any(n.startswith("chat.jsonl: line 7: `messages` is not JSON") for n in got.notes)
    with pytest.raises(FileNotFoundError, match="no sft_examples table"):
        table_examples(policy, str(tmp_path / "nothing"), digest)
