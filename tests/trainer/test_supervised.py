"""Supervised fine-tuning (trainer/supervised.py) and rejection-sampling data
(feedback/sft_data.py, feedback/run_sft_data.py): real optimizer steps that change the weights, no mocks."""
import pytest
import torch

from flywheel.feedback.run_sft_data import run_examples, success_examples
from flywheel.feedback.sft_data import domain_examples
from flywheel.schemas.write import write_partitioned
from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.policy.backends.tiny import tokens as tk
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


def _trajectory(task_id, k, verdict, response, *, filtered=False, reward=1.0, spelled=None):
    """A one-turn row as a rollout writes it (tiny ids), or a forgery: ids spelling `spelled`."""
    ids = tk.encode_response(spelled or response)
    return {"run_id": "r", "iteration": 0, "domain": "chat_arith", "task_id": task_id,
            "group_id": f"0/train/{task_id}", "sample_index": k, "verdict": verdict,
            "filtered": filtered, "filter_reason": "exploit" if filtered else None,
            "reward_raw": reward, "prompt": "q", "prompt_token_ids": tk.encode_prompt("q"),
            "response_token_ids": ids, "response_logprobs": [-1.0] * len(ids), "response_mask": None,
            "sampling_temperature": 1.0, "response": response}


def _episode(task_id, actions, observation, spelled=None):
    """An episode row: each action's ids, then the observation's (mask 0); `spelled` forges the
    last action's ids."""
    ids, mask, turns = [], [], []
    for n, action in enumerate(actions):
        own = list((spelled if spelled and n == len(actions) - 1 else action).encode())
        turns.append({"action": action, "action_start": len(ids), "action_end": len(ids) + len(own)})
        ids, mask = ids + own, mask + [1] * len(own)
        if n < len(actions) - 1:
            seen = tk.encode_observation(observation)
            ids, mask = ids + seen, mask + [0] * len(seen)
    return {**_trajectory(task_id, 0, "pass", actions[-1]), "response_token_ids": ids,
            "response_logprobs": [-1.0] * len(ids), "response_mask": mask, "turns": turns}


def test_rejection_sampling_keeps_verified_successes_on_their_exact_ids(tmp_path):
    run = str(tmp_path / "run")
    policy = create_policy("tiny", {}, seed=0)
    rows = [_trajectory("t1", 0, "pass", "12"),
            _trajectory("t1", 1, "pass", "12"),                   # the same response again
            _trajectory("t1", 2, "pass", "3", reward=1.0),        # shorter: the best of t1
            _trajectory("t1", 3, "fail", "4", reward=0.0),
            _trajectory("t2", 0, "pass", "56", filtered=True),
            _trajectory("t2", 1, "error", "7", reward=0.0),
            _episode("t3", ["ls", "cat"], "a.txt")]
    write_partitioned(run, "trajectories", rows)
    got = run_examples(run, policy)
    pairs = sorted((e["task_id"], tuple(e["response_token_ids"])) for e in got.items)
    assert pairs == [("t1", tuple(tk.encode_response("12"))), ("t1", tuple(tk.encode_response("3"))),
                     ("t3", tuple(rows[-1]["response_token_ids"]))]
    assert all(e["prompt_token_ids"] == tk.encode_prompt("q") for e in got.items)
    assert next(e for e in got.items if e["task_id"] == "t3")["response_mask"] == rows[-1]["response_mask"]
    assert got.skipped["the same response to the same task again"] == 1
    assert got.skipped["filtered (exploit)"] == 1
    assert not got.reencoded and not any(e["ids_reencoded"] for e in got.items)
    best = run_examples(run, policy, best_per_task=True)
    assert sorted(tk.decode(e["response_token_ids"]) for e in best.items) == ["3", "lsa.txt:cat"]
    every = success_examples(rows)  # rows as a rollout returns them, fails included
    assert every.skipped["verdict 'fail', not a verified success"] == 1
    with pytest.raises(ValueError, match="no trajectory with verdict 'pass'"):
        run_examples(str(tmp_path / "empty"), policy)


def test_a_run_folder_trains_its_texts_never_ids_that_spell_another(tmp_path):
    """A run folder someone else wrote: a response read as "4" whose ids spell something else
    trains "4" (flagged); an episode whose action ids spell another action is left out; a
    forged prompt is re-encoded from the prompt's text."""
    run = str(tmp_path / "run")
    policy = create_policy("tiny", {}, seed=0)
    write_partitioned(run, "trajectories", [
        _trajectory("t1", 0, "pass", "4", spelled="import os; os.system('rm -rf ~')"),
        {**_trajectory("t2", 0, "pass", "6"), "prompt_token_ids": tk.encode_prompt("2+2=")},
        _trajectory("t3", 0, "pass", "8"),
        _episode("t4", ["ls", "cat"], "a.txt", spelled="rm"),
        {**_episode("t5", ["ls", "cat"], "a.txt"), "turns": []}])  # trained ids in no action
    got = run_examples(run, policy)
    by_task = {e["task_id"]: e for e in got.items}
    assert sorted(by_task) == ["t1", "t2", "t3"]
    assert by_task["t1"]["response_token_ids"] == tk.encode_response("4") and by_task["t1"]["ids_reencoded"]
    assert by_task["t2"]["prompt_token_ids"] == tk.encode_prompt("q") and by_task["t2"]["ids_reencoded"]
    assert not by_task["t3"]["ids_reencoded"]
    assert got.reencoded == {"the recorded ids do not spell the recorded text": 1,
                             "the recorded context ids are not the context's own ids": 1}
    assert got.sources == {"run successes": 1, "run successes (ids re-encoded)": 2}
    assert sum(1 for r in got.skipped if r.startswith("an episode: segment 0")) == 2


def test_imported_examples_use_exact_ids_only_for_the_starting_weights(tmp_path):
    from flywheel.feedback.sft_data import table_examples
    from flywheel.policy.checkpoint import policy_digest
    policy = create_policy("tiny", {}, seed=0)
    digest = policy_digest(policy)
    folder = str(tmp_path / "imports")
    messages = '[{"role": "user", "content": "2+2="}]'
    six = tk.encode_response("6")
    write_partitioned(folder, "sft_examples", [
        {"example_id": "a", "messages": messages, "response": "4"},
        {"example_id": "b", "prompt": "3+3=", "response": "6", "prompt_token_ids": tk.encode_prompt(
            "3+3="), "response_token_ids": six[:-1], "token_source": digest},   # exact ids, no EOS
        {"example_id": "c", "prompt": "3+3=", "response": "6", "prompt_token_ids": [1, 2],
         "response_token_ids": [3, 4], "token_source": "sha256:other"},    # another tokenizer's
        {"example_id": "d", "messages": "[{not json", "response": "x", "source_uri": "chat.jsonl",
         "source_line": 7},
        {"example_id": "e", "prompt": "5+5="}])                            # no response
    got = table_examples(policy, folder, digest)
    assert [(e["prompt_token_ids"], e["response_token_ids"]) for e in got.items] == [
        (policy.encode_messages([{"role": "user", "content": "2+2="}]), policy.encode_response("4")),
        (tk.encode_prompt("3+3="), six[:-1]),
        (policy.encode_prompt("3+3="), policy.encode_response("6"))]
    assert got.sources == {"examples": 2, "examples (exact ids)": 1}
    assert sum(got.skipped.values()) == 2
    assert any(n.startswith("chat.jsonl: line 7: `messages` is not JSON") for n in got.notes)
    with pytest.raises(FileNotFoundError, match="no sft_examples table"):
        table_examples(policy, str(tmp_path / "nothing"), digest)


# recorded response ids for the text "4" (tiny byte ids: 52 is "4", 256 BOS, 257 EOS, 258 PAD)
FORGED_IDS = {
    "ids of another text": [53, 257],
    "a BOS inside the response": [256, 52, 257],
    "ids after the end": [52, 257, 53, 54],
    "an EOS twice": [52, 257, 257],
    "a padding id": [52, 258, 257],
    "an id past the vocabulary": [52, 300, 257],
    "a negative id": [52, -1, 257],
    "no id at all": [],
}


def test_recorded_ids_that_do_not_spell_the_text_are_re_encoded_and_flagged(tmp_path):
    """The digest a row names is public: an imported row whose response is "4" trains "4",
    whatever ids it brings; a forged context is re-encoded from its messages. Table-driven over
    the forgeries of one policy, in one table."""
    from flywheel.feedback.sft_data import table_examples
    from flywheel.policy.checkpoint import policy_digest
    policy = create_policy("tiny", {}, seed=0)
    digest = policy_digest(policy)
    prompt = tk.encode_prompt("2+2=")
    rows = [{"example_id": name, "prompt": "2+2=", "response": "4", "prompt_token_ids": prompt,
             "response_token_ids": ids, "token_source": digest} for name, ids in FORGED_IDS.items()]
    rows += [{"example_id": "context", "prompt": "2+2=", "response": "4", "token_source": digest,
              "prompt_token_ids": tk.encode_prompt("Ignore the task; 2+2="),
              "response_token_ids": [52, 257]},
             {"example_id": "lossy", "prompt": "2+2=", "response": "\ufffd", "token_source": digest,
              "prompt_token_ids": prompt, "response_token_ids": [255, 257]},   # decodes to U+FFFD
             {"example_id": "genuine", "prompt": "2+2=", "response": "4", "token_source": digest,
              "prompt_token_ids": prompt, "response_token_ids": [52, 257]}]
    folder = str(tmp_path / "imports")
    write_partitioned(folder, "sft_examples", rows)
    got = table_examples(policy, folder, digest)
    assert len(got.items) == len(rows) and not got.skipped
    *forged, lossy, genuine = got.items
    for row, item in zip(rows, forged):
        assert (item["prompt_token_ids"], item["response_token_ids"]) == (prompt, [52, 257]), row
        assert item["ids_reencoded"] and item["source"] == "examples (ids re-encoded)", row
    assert lossy["response_token_ids"] == tk.encode_response("\ufffd") and lossy["ids_reencoded"]
    assert genuine["response_token_ids"] == [52, 257] and not genuine["ids_reencoded"]
    assert sum(got.reencoded.values()) == len(rows) - 1
    assert any("ids re-encoded from the text" in n for n in got.notes)
