"""vLLM's step loop (continuous batching) beside batch-at-a-time sampling, for episode loops.

    python bench/vllm_continuous.py [--model smollm2] [--episodes 8] [--turns 4] [--rounds 2]
                                    [--block-size 128]

Simulated episodes, each a thread of its own as in RunEpisodes: ask the worker's batching engine
(policy/batching_engine.py) for the next action, "run a tool" (a sleep of 0-`--tool-s` seconds,
drawn per episode and turn), append the action and an observation to the context, repeat. The
same episodes run through one vLLM engine twice per round, in alternating order:

- `batch`: the generation thread calls `engine.sample` on whatever is pending and waits for the
  whole batch to finish before it takes the next requests (a request that arrives meanwhile waits);
- `step`: the generation thread drives vLLM's step loop (`enqueue`, `step`): a request joins the
  running engine at its next step.

Printed per mode: the batch's wall seconds, new tokens/s, the mean requests per engine call
(batch) or per step (step), the queue wait per request, the prefix-cache hit rate (prompt tokens
served from vLLM's cache / prompt tokens), and whether both modes drew the same ids (each request
carries its own seed, so they must).
"""
from __future__ import annotations

import argparse
import random
import threading
import time


def run_episodes(batcher, policy, episodes: int, turns: int, tool_s: float, new_tokens: int):
    """All episodes through `batcher`, each on a thread; (wall s, responses, queue ms, tokens)."""
    responses: dict[tuple[int, int], list[int]] = {}
    queue_ms = [0.0]
    guard = threading.Lock()

    def episode(e: int) -> None:
        rng = random.Random(e)
        context = policy.encode_prompt(f"Episode {e}: fix the function `f{e}` so that its tests "
                                       "pass. Reply with one shell command per turn.")
        with batcher.client() as client:
            for t in range(turns):
                sample = client.sample([context], [1.0], [1000 * e + t], new_tokens)[0]
                with guard:
                    responses[(e, t)] = sample.token_ids
                time.sleep(rng.uniform(0.0, tool_s))  # the tool call
                observation = policy.tokenizer.encode(f"\nexit code {rng.randint(0, 2)}: "
                                                      f"{rng.randint(1, 9)} tests failed\n",
                                                      add_special_tokens=False)
                context = context + sample.token_ids + observation
            with guard:
                queue_ms[0] += client.queue_ms

    threads = [threading.Thread(target=episode, args=(e,)) for e in range(episodes)]
    started = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - started
    tokens = sum(len(r) for r in responses.values())
    return wall, responses, queue_ms[0] / max(1, len(responses)), tokens


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="smollm2")
    p.add_argument("--episodes", type=int, default=8)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--tool-s", type=float, default=0.5, help="longest tool call (uniform 0..)")
    p.add_argument("--new-tokens", type=int, default=24)
    p.add_argument("--block-size", type=int, default=None,
                   help="vLLM's KV block on CPU (the prefix cache's granularity; default 32)")
    args = p.parse_args()
    if args.block_size:
        from flywheel.policy.backends.hf import vllm_engine
        vllm_engine.CPU_BLOCK_SIZE = args.block_size

    from flywheel.policy.backends import create_policy
    from flywheel.policy.batching_engine import BatchingEngine
    from flywheel.policy.checkpoint import Checkpoint, policy_digest
    from flywheel.policy.rollout_engine import create_engine

    policy = create_policy("hf", {"model": args.model, "engine": "vllm",
                                  "max_new_tokens": str(args.new_tokens)}, seed=0)
    policy.module.eval()
    engine = create_engine("vllm")
    t0 = time.perf_counter()
    engine.update_weights(Checkpoint(policy, None, {}, policy_digest(policy)))
    print(f"engine start {time.perf_counter() - t0:.1f} s")
    run_episodes(BatchingEngine(engine, continuous=True), policy, 2, 1, 0.0, 4)  # warm-up
    engine.take_counters()
    figures: dict[str, list] = {"batch": [], "step": []}
    drawn: dict[str, dict] = {}
    for k in range(args.rounds):
        for mode in (("batch", "step") if k % 2 == 0 else ("step", "batch")):
            engine.engine.llm.reset_prefix_cache()  # each run starts with an empty cache
            batcher = BatchingEngine(engine, continuous=mode == "step")
            wall, responses, queue, tokens = run_episodes(batcher, policy, args.episodes,
                                                          args.turns, args.tool_s, args.new_tokens)
            sizes = batcher.take_stats()
            batcher.close()
            c = engine.take_counters()
            hit = c["vllm_prompt_tokens_cached"] / max(1, c["vllm_prompt_tokens"])
            figures[mode].append((wall, tokens / wall, sum(sizes) / max(1, len(sizes)), queue, hit))
            drawn.setdefault(mode, responses)
            print(f"round {k} {mode:5s}: {wall:6.1f} s  {tokens / wall:6.1f} new tokens/s  "
                  f"mean rows/call {sum(sizes) / max(1, len(sizes)):5.2f}  queue {queue:7.1f} ms/request  "
                  f"prefix-cache hit rate {hit:.2f}", flush=True)
    print(f"\n{args.episodes} episodes x {args.turns} turns, {args.new_tokens} new tokens per turn, "
          f"tools 0-{args.tool_s} s, {args.rounds} rounds")
    for mode, rows in figures.items():
        walls = [r[0] for r in rows]
        print(f"{mode:5s}: wall {min(walls):.1f}-{max(walls):.1f} s, "
              f"{sum(r[1] for r in rows) / len(rows):.1f} new tokens/s, "
              f"hit rate {sum(r[4] for r in rows) / len(rows):.2f}")
    ratio = sum(r[0] for r in figures["batch"]) / sum(r[0] for r in figures["step"])
    print(f"batch wall / step wall: {ratio:.2f}x")
    print(f"same ids in both modes: {drawn['batch'] == drawn['step']}")
    engine.close()


if __name__ == "__main__":  # vLLM's engine starts spawned processes
    main()
