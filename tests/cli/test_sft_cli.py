"""`flywheel sft` and `flywheel dpo` end to end on tiny-llama: real steps, a real checkpoint."""
import datetime as dt
import hashlib

import pytest
import torch

pytest.importorskip("transformers", reason="the hf extra is not installed")

from flywheel.cli.main import main  # noqa: E402
from flywheel.schemas.write import write_partitioned  # noqa: E402
from flywheel.policy.checkpoint import load_checkpoint  # noqa: E402
from flywheel.policy.backends import create_policy  # noqa: E402


@pytest.fixture(autouse=True)
def model_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLYWHEEL_MODEL_CACHE", str(tmp_path / "model-cache"))


def test_sft_on_a_domain_writes_a_checkpoint_with_its_curve(tmp_path, capsys):
    out = str(tmp_path / "sft")
    rc = main(["sft", "--policy-options", "model=tiny-llama,lora_r=4", "--domain", "chat_arith",
               "--n", "8", "--epochs", "1", "--lr", "1e-3", "--out", out,
               "--eval-domain", "chat_arith", "--eval-tasks", "4"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "chat_arith" in text and "held-out pass@1" in text and "--init-checkpoint" in text
    ckpt = load_checkpoint(out)
    sft = ckpt.meta["sft"]
    assert ckpt.meta["stage"] == "sft" and sft["data"]["sources"] == {"chat_arith": 8}
    assert [h["epoch"] for h in sft["heldout"]] == [0, 1] and len(sft["epochs"]) == 1
    assert sft["epochs"][0]["examples"] == 8 and sft["epochs"][0]["loss"] > 0
    base = create_policy("hf", {"model": "tiny-llama", "lora_r": 4}, seed=0)
    assert ckpt.digest != load_digest(base)  # the adapter moved
    assert ckpt.optimizer_state is not None


def load_digest(policy):
    from flywheel.policy.checkpoint import policy_digest
    return policy_digest(policy)


def test_dpo_from_reviews_starts_from_a_checkpoint(tmp_path, capsys):
    sft = str(tmp_path / "sft")
    assert main(["sft", "--policy-options", "model=tiny-llama", "--domain", "chat_arith", "--n", "2",
                 "--epochs", "1", "--out", sft]) == 0
    run = str(tmp_path / "run")
    policy = create_policy("hf", {"model": "tiny-llama"}, seed=0)
    prompt = policy.encode_prompt("What is 2 + 3?")
    texts = {0: "5", 1: "7", 2: "6"}
    write_partitioned(run, "trajectories", [
        {"run_id": "r", "iteration": 0, "domain": "chat_arith", "task_id": "t", "group_id": "0/train/t",
         "sample_index": k, "prompt": "What is 2 + 3?", "prompt_token_ids": prompt,
         "response_token_ids": policy.encode_response(t),
         "response": t, "verdict": "pass"} for k, t in texts.items()])
    now = dt.datetime(2026, 12, 6, tzinfo=dt.timezone.utc)
    write_partitioned(run, "reviews", [
        {"iteration": 0, "review_id": str(k), "group_id": "0/train/t", "sample_index": k,
         "score": score, "created_at": now,
         "response_digest": hashlib.sha256(texts[k].encode()).hexdigest()}
        for k, score in ((0, 1.0), (1, 0.0), (2, 0.0))])
    out = str(tmp_path / "dpo")
    capsys.readouterr()
    rc = main(["dpo", "--from-checkpoint", sft, "--reviews-run", run, "--beta", "0.5",
               "--lr", "1e-3", "--epochs", "2", "--out", out])
    text = capsys.readouterr().out
    assert rc == 0, text
    meta = load_checkpoint(out).meta
    assert meta["stage"] == "dpo" and meta["dpo"]["start"]["checkpoint"] == sft
    epochs = meta["dpo"]["epochs"]
    assert epochs[0]["pairs"] == 2 and epochs[-1]["reward_margin"] > epochs[0]["reward_margin"]
    assert "the only reviewed attempt" not in text


def test_errors_say_what_was_expected(tmp_path, capsys):
    assert main(["sft", "--policy-options", "model=tiny-llama", "--out", str(tmp_path / "x")]) == 2
    assert "needs a data source: --tasks, --domain, --examples, --from-run" in capsys.readouterr().out
    rc = main(["sft", "--policy-options", "model=tiny-llama", "--examples", str(tmp_path / "none"),
               "--out", str(tmp_path / "x")])
    assert rc == 2 and "no sft_examples table" in capsys.readouterr().out
    bad = tmp_path / "tasks.jsonl"
    bad.write_text('{"domain": "chat_arith", "task_id": "a", "prompt": "1+1?", "answer": "2", '
                   '"reference": "2"}\nnot json\n{"domain": "nope", "prompt": "x"}\n'
                   '{"domain": "chat_arith", "task_id": "h", "prompt": "2+2?", "answer": "4", '
                   '"split": "heldout"}\n')
    out = str(tmp_path / "t")
    rc = main(["sft", "--policy-options", "model=tiny-llama", "--tasks", str(bad), "--epochs", "1",
               "--out", out])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "invalid JSON" in text and "unknown domain 'nope'" in text and "tasks.jsonl: line 2" in text
    assert "a held-out task" in text
    assert load_checkpoint(out).meta["sft"]["data"]["sources"] == {"tasks": 1}
    assert torch.is_grad_enabled()
