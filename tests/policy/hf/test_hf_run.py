"""`flywheel run --policy hf --model DIR` runs a real iteration on the tiny Llama: its tables hold
the chat-templated prompt ids, the sampled ids and one log-probability per token, which the
checkpoint the rows were sampled from scores the same."""
import subprocess

import pytest
import torch

from flywheel.schemas import read_table
from flywheel.policy.checkpoint import load_checkpoint
from flywheel.trainer.trajectory_batches import make_batch


@pytest.mark.slow
def test_one_iteration_end_to_end(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    done = subprocess.run(
        ["flywheel", "run", "--run-dir", str(run), "--policy", "hf", "--model", str(tiny_model_dir),
         "--iterations", "1", "--tasks-per-domain", "8", "--heldout-per-domain", "4",
         "--n-samples", "4", "--warm-start-max-steps", "40", "--loss", "dapo"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (run / "iterations" / "0" / "_COMMITTED").exists()
    assert (run / "checkpoints" / "iteration=0" / "hf" / "model.safetensors").exists()

    rows = read_table(str(run / "tables" / "trajectories" / "iteration=0"), "trajectories").to_pylist()
    assert len(rows) == 4 * 8 * 4  # domains x tasks x samples (held-out attempts are metrics only)
    initial = load_checkpoint(str(run / "checkpoints" / "initial")).policy
    initial.module.eval()
    for r in rows:
        assert r["prompt_token_ids"] == initial.encode_prompt(r["prompt"])  # chat template applied
        assert 0 < len(r["response_token_ids"]) == len(r["response_logprobs"])
        assert r["response"] == initial.decode(r["response_token_ids"])
    batch = make_batch(rows, initial.pad_id)
    with torch.no_grad():
        scored = initial.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"])
    mask = batch["response_mask"].bool()
    assert (scored[mask] - batch["old_logprobs"][mask]).abs().max() < 1e-4

    metrics = {r["name"]: r["value"] for r in read_table(str(run / "tables" / "metrics"), "metrics")
               .to_pylist() if r["name"].startswith("train/")}
    assert {"train/loss", "train/entropy", "train/clip_frac", "train/grad_norm"} <= set(metrics)
    if metrics["train/n_sequences"]:
        assert metrics["train/logprob_diff_max"] < 1e-4


@pytest.mark.slow
def test_kill_9_then_resume_with_an_hf_policy(tiny_model_dir, tmp_path):
    """Killed while iteration 1 writes its tables, the run resumes there; no row is lost or
    duplicated, and the resumed run's HF checkpoints load and score iteration 2's rows as their
    sampler did."""
    import sys

    from tests.killed_run import kill_while_iteration_1_writes

    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "flywheel.cli.main", "run", "--run-dir", str(run),
           "--policy", "hf", "--model", str(tiny_model_dir), "--iterations", "3",
           "--domains", "add,interval", "--tasks-per-domain", "4", "--heldout-per-domain", "2",
           "--n-samples", "4", "--warm-start-max-steps", "0"]
    layout = kill_while_iteration_1_writes(cmd, run, within_s=300)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert layout.committed_iterations() == [0, 1, 2]
    rows = read_table(str(run / "tables" / "trajectories"), "trajectories").to_pylist()
    keys = [(r["iteration"], r["task_id"], r["sample_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == 3 * 2 * 4 * 4
    last = [r for r in rows if r["iteration"] == 2]
    sampler = load_checkpoint(str(run / "checkpoints" / "iteration=1")).policy
    sampler.module.eval()
    batch = make_batch(last, sampler.pad_id)
    with torch.no_grad():
        scored = sampler.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"])
    mask = batch["response_mask"].bool()
    assert (scored[mask] - batch["old_logprobs"][mask]).abs().max() < 1e-4
