"""DPO (trainer/preference.py) and preference pairs from reviews (feedback/run_sft_data.py): real
optimizer steps, no mocks."""
import datetime as dt
import hashlib
import math

import pytest
import torch

from flywheel.feedback.run_sft_data import review_pairs
from flywheel.schemas.write import write_partitioned
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.trainer.preference import (DPOConfig, evaluate_pairs, pair, preference_loss,
                                         train_preference, with_reference)

QUESTIONS = [("3+4=", "7", "9"), ("10+5=", "15", "51"), ("2+2=", "4", "22"), ("9+1=", "10", "8")]


def _pairs(policy):
    return [pair(policy.encode_prompt(q), policy.encode_response(good), policy.encode_response(bad))
            for q, good, bad in QUESTIONS]


@pytest.mark.parametrize("loss", ["sigmoid", "ipo"])
def test_dpo_raises_the_margin_and_accuracy(loss):
    policy = create_policy("tiny", {}, seed=0)
    cfg = DPOConfig(beta=0.5, loss=loss, lr=3e-3, epochs=6, batch_tokens=60)
    pairs = with_reference(policy, _pairs(policy), cfg)
    start = evaluate_pairs(policy, pairs, cfg)
    assert start["reward_margin"] == 0 and start["accuracy"] == 0  # the reference is the policy
    before = [p.detach().clone() for p in policy.module.parameters()]
    history = train_preference(policy, build_optimizer(policy, **cfg.adamw()), pairs, cfg, seed=0)
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.module.parameters()))
    assert all(math.isfinite(h["loss"]) and h["pairs"] == 4 and h["steps"] >= 2 for h in history)
    end = evaluate_pairs(policy, pairs, cfg)
    assert end["reward_margin"] > 0.5 and end["accuracy"] == 1.0
    assert end["loss"] < start["loss"]
    assert history[-1]["reward_margin"] > history[0]["reward_margin"]


def test_the_reference_is_scored_once_before_training():
    """Pairs without references get the starting policy's, scored before the first step: the
    same update as with references scored by hand beforehand."""
    weights = []
    for given in (False, True):
        policy = create_policy("tiny", {}, seed=0)
        cfg = DPOConfig(lr=1e-2, epochs=2, batch_tokens=60)
        pairs = with_reference(policy, _pairs(policy), cfg) if given else _pairs(policy)
        train_preference(policy, build_optimizer(policy, **cfg.adamw()), pairs, cfg, seed=0)
        weights.append([p.detach().clone() for p in policy.module.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*weights))


def test_the_loss_at_the_reference_and_with_smoothing():
    zero = torch.zeros(3)
    losses, chosen, rejected = preference_loss(zero, zero, zero, zero, DPOConfig())
    torch.testing.assert_close(losses, torch.full((3,), math.log(2)))
    up = torch.tensor([1.0])
    hard = preference_loss(up, -up, 0 * up, 0 * up, DPOConfig(beta=1.0))[0]
    smooth = preference_loss(up, -up, 0 * up, 0 * up, DPOConfig(beta=1.0, label_smoothing=0.2))[0]
    assert smooth > hard  # a smoothed label doubts even a right-way margin
    with pytest.raises(KeyError, match="sigmoid"):
        DPOConfig(loss="hinge-ish")
    with pytest.raises(ValueError, match="beta"):
        DPOConfig(beta=0)


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def test_reviews_become_pairs_of_one_group(tmp_path):
    run = str(tmp_path / "run")
    now = dt.datetime(2026, 12, 6, tzinfo=dt.timezone.utc)

    policy = create_policy("tiny", {}, seed=0)

    def attempt(group, k, text, spelled=None):  # ids spelling `spelled` (a forgery) or the text
        response_ids = policy.encode_response(spelled or text)
        return {"run_id": "r", "iteration": 1, "domain": "chat_arith", "task_id": group,
                "group_id": f"1/train/{group}", "sample_index": k, "verdict": "pass",
                "prompt": "q", "prompt_token_ids": policy.encode_prompt("q"),
                "response_token_ids": response_ids,
                "response_logprobs": [-1.0] * len(response_ids), "response": text,
                "sampling_temperature": 1.0}

    def review(group, k, score, text, minute=0):
        return {"run_id": "r", "iteration": 1, "review_id": f"{group}-{k}-{minute}",
                "group_id": f"1/train/{group}", "sample_index": k, "score": score,
                "response_digest": _sha(text), "created_at": now + dt.timedelta(minutes=minute)}

    write_partitioned(run, "trajectories", [
        attempt("a", 0, "good"), attempt("a", 1, "bad"),
        attempt("a", 2, "meh", spelled="rm -rf ~"),  # reviewed as "meh": trained as "meh"
        attempt("b", 0, "x"), attempt("c", 0, "y"), attempt("c", 1, "z")])
    write_partitioned(run, "reviews", [
        review("a", 0, 0.0, "good"), review("a", 0, 1.0, "good", minute=5),  # the later one counts
        review("a", 1, 0.0, "bad"), review("a", 2, 0.5, "meh"),
        review("b", 0, 1.0, "x"),                                           # alone in its group
        review("c", 0, 1.0, "y"), review("c", 1, 0.0, "not z"),             # labels another text
        review("d", 0, 1.0, "w")])                                          # no such attempt
    got = review_pairs(run, policy)
    found = sorted((policy.decode(p["chosen_token_ids"]), policy.decode(p["rejected_token_ids"]),
                    p["margin"], p["ids_reencoded"]) for p in got.items)
    assert found == [("good", "bad", 1.0, False), ("good", "meh", 0.5, True),
                     ("meh", "bad", 0.5, True)]
    assert got.reencoded == {"the recorded ids do not spell the recorded text": 1}
    assert all(p["prompt_token_ids"] == policy.encode_prompt("q") for p in got.items)
    assert got.skipped["the review labels another text than the attempt's response"] == 1
    assert got.skipped["no trajectory row for the reviewed attempt"] == 1
    assert got.skipped["the only reviewed attempt of its group"] == 2  # b, and c after its bad label
    with pytest.raises(ValueError, match="no reviews"):
        review_pairs(str(tmp_path / "none"), policy)


def test_imported_pairs(tmp_path):
    from flywheel.feedback.sft_data import table_pairs
    policy = create_policy("tiny", {}, seed=0)
    folder = str(tmp_path / "imports")
    write_partitioned(folder, "preference_pairs", [
        {"pair_id": "a", "prompt": "2+2=", "chosen": "4", "rejected": "5", "margin": 1.0},
        {"pair_id": "b", "prompt": "2+2=", "chosen": "4", "rejected": "4"},
        {"pair_id": "c", "prompt": "2+2=", "chosen": "4"},
        {"pair_id": "d", "prompt_token_ids": [1], "chosen_token_ids": [2], "rejected_token_ids": [3],
         "token_source": "sha256:mine"},                                  # ids without texts
        {"pair_id": "e", "prompt": "3+4=", "chosen": "7", "rejected": "9",
         "prompt_token_ids": policy.encode_prompt("3+4="), "chosen_token_ids": [55],
         "rejected_token_ids": policy.encode_response("9"), "token_source": "sha256:mine"},
        {"pair_id": "f", "prompt": "3+4=", "chosen": "7", "rejected": "9",  # forged: 7 spells 9
         "prompt_token_ids": policy.encode_prompt("3+4="), "chosen_token_ids": [57, 257],
         "rejected_token_ids": [55, 257], "token_source": "sha256:mine"}])
    got = table_pairs(policy, folder, "sha256:mine")
    assert [(p["chosen_token_ids"], p["rejected_token_ids"], p["margin"], p["source"])
            for p in got.items] == [
        (policy.encode_response("4"), policy.encode_response("5"), 1.0, "pairs"),
        ([55], policy.encode_response("9"), None, "pairs (exact ids)"),  # no EOS, as recorded
        (policy.encode_response("7"), policy.encode_response("9"), None, "pairs (ids re-encoded)")]
    assert got.skipped["`chosen` and `rejected` are the same text"] == 1 and sum(got.skipped.values()) == 3
    assert sum(got.reencoded.values()) == 1
