"""`flywheel export`: a run's checkpoint (full fine-tune or LoRA, local or gs://) becomes a plain
Hugging Face folder that transformers loads with the checkpoint's logits; a wrong iteration, a
non-empty OUT and a tiny-policy run are refused with what was expected.

Here rather than in tests/pipelines/ because it needs the hf extra and the tiny Llama fixture."""
import pytest
import torch

from flywheel.cli.main import main
from flywheel.settings.layout import RunLayout
from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.trainer.train_step import TrainConfig, train_on_rows
from flywheel.policy.rollout_engine import engine_for

TEXTS = ["What is 17 + 5?", "rev:abcd=", "from 3 to 9:"]


def _trained(options: dict):
    """A policy after one optimizer step on its own samples (so LoRA's B is no longer zero)."""
    policy = create_policy("hf", options, seed=0)
    policy.module.eval()
    prompts = [policy.encode_prompt(t) for t in TEXTS for _ in range(2)]
    samples = engine_for(policy, local=True).sample(prompts, [1.0] * 6, seeds=list(range(6)), max_new_tokens=8)
    rows = [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                 advantage=1.0 if i % 2 else -1.0, sampling_temperature=1.0, filtered=False)
            for i, (p, s) in enumerate(zip(prompts, samples))]
    cfg = TrainConfig(epochs=1, minibatch_size=6, lr=1e-2)
    optimizer = build_optimizer(policy, **cfg.adamw())
    train_on_rows(policy, optimizer, rows, cfg, seed=0)
    policy.module.eval()
    return policy, optimizer


def _run_with(run_dir: str, policy, optimizer, iteration) -> None:
    layout = RunLayout(run_dir)
    layout.write_json(layout.run_json, {"run_id": "export-test"})
    save_checkpoint(layout.checkpoint(iteration), policy, optimizer, {"policy_version": 1})


def _assert_same_logits(out: str, checkpoint_uri: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert not any("lora" in n for n in model.state_dict())
    policy = load_checkpoint(checkpoint_uri).policy
    policy.module.eval()
    for text in TEXTS:
        ids = policy.encode_prompt(text)
        assert tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True)  # the template came along
        x = torch.tensor([ids])
        with torch.no_grad():
            torch.testing.assert_close(model(input_ids=x).logits, policy.causal_lm(input_ids=x).logits,
                                       atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("lora_r", [0, 4])
def test_export_gives_the_checkpoints_logits(tiny_model_dir, tmp_path, lora_r, capsys):
    policy, optimizer = _trained({"model": str(tiny_model_dir), "lora_r": lora_r})
    run = str(tmp_path / "run")
    _run_with(run, policy, optimizer, 2)
    out = tmp_path / "merged"
    assert main(["export", "--run-dir", run, "--iteration", "2", str(out)]) == 0
    assert ("LoRA adapter merged" in capsys.readouterr().out) == bool(lora_r)
    assert (out / "model.safetensors").exists() and (out / "flywheel_export.json").exists()
    _assert_same_logits(str(out), RunLayout(run).checkpoint(2))


def test_bad_requests_name_what_was_expected(tiny_model_dir, tmp_path, capsys):
    policy, optimizer = _trained({"model": str(tiny_model_dir)})
    run = str(tmp_path / "run")
    _run_with(run, policy, optimizer, None)
    _run_with(run, policy, optimizer, 0)

    def error(*argv):
        assert main(["export", "--run-dir", *argv]) == 2
        return " ".join(capsys.readouterr().out.split())

    assert "has no checkpoint of iteration 5; it has: initial, 0" in error(run, "--iteration", "5",
                                                                           str(tmp_path / "a"))
    assert "expected an iteration number" in error(run, "--iteration", "last", str(tmp_path / "a"))
    assert "holds no run (no run.json)" in error(str(tmp_path / "nothing"), "--iteration", "0",
                                                 str(tmp_path / "a"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert "exists and is not empty" in error(run, "--iteration", "0", str(tmp_path / "full"))
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    assert main(["export", "--run-dir", run, "--iteration", "initial", str(tmp_path / "empty")]) == 0

    tiny = str(tmp_path / "tiny-run")
    _run_with(tiny, create_policy("tiny", {}, seed=0), None, 0)
    assert "backend `tiny` has no Hugging Face format" in error(tiny, "--iteration", "0",
                                                                str(tmp_path / "b"))
    assert not (tmp_path / "b").exists()


def test_export_from_and_to_gs(tiny_model_dir, gcs_emulator, tmp_path, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    policy, optimizer = _trained({"model": str(tiny_model_dir), "lora_r": 4})
    run = "gs://runs/export-test"
    _run_with(run, policy, optimizer, 1)
    assert main(["export", "--run-dir", run, "--iteration", "1", str(tmp_path / "local")]) == 0
    _assert_same_logits(str(tmp_path / "local"), RunLayout(run).checkpoint(1))
    assert main(["export", "--run-dir", run, "--iteration", "1", "gs://runs/exported"]) == 0
    assert main(["export", "--run-dir", run, "--iteration", "1", "gs://runs/exported"]) == 2
    from flywheel.policy.backends.hf.model_files import local_path
    _assert_same_logits(local_path("gs://runs/exported"), RunLayout(run).checkpoint(1))
