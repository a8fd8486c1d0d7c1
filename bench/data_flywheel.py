"""The data flywheel end to end: an application's traffic in, the next run trains on it.

    python bench/data_flywheel.py [--model smollm2] [--requests 32] [--seed 0] [--out DIR]

1. `flywheel serve --model M --record-dir OUT/records` (a real process on 127.0.0.1).
2. An "application" talks to it with the official `openai` client: chat_arith word problems
   (train split) at temperature 0.7, `logprobs=True`. Its user checks each answer (the domain's own verifier stands
   in for the person) and sends feedback: thumbs up, or thumbs down with the right answer as a
   correction.
3. The server stops (SIGTERM); the recorded rows are compared with what the client got: the same
   response text and log-probabilities, and the policy's `token_logprobs` recomputes them.
4. `flywheel import OUT/records --as tasks,sft,pairs --domain chat_arith
   --field answer=correction|response` -> RL tasks, SFT examples, preference pairs.
5. `flywheel run --policy hf --model M --tasks OUT/imported/tasks.jsonl --tasks-per-domain 0` for
   one iteration: the run's trajectories hold the imported tasks (their `imp-` ids).

Prints each step's figures; exit status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from flywheel.domains.registry import get_domain
from flywheel.verifiers import get_verifier


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, records: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "flywheel.cli.main", "serve", "--model", model,
                             "--record-dir", str(records), "--port", str(port),
                             "--flush-seconds", "1", "--no-token"],  # its app sends no key
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if json.load(r)["status"] == "ok":
                    return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"flywheel serve exited: {proc.stdout.read()}")
            time.sleep(1)
    proc.kill()
    raise SystemExit("flywheel serve did not answer /health in 300 s")


def application(port: int, requests: int, seed: int) -> list[dict]:
    """The app's side: ask, check, give feedback; what it got back, per request."""
    import openai
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                           max_retries=0, timeout=300)
    domain, verifier = get_domain("chat_arith"), get_verifier(get_domain("chat_arith").verifier)
    seen = []
    for i in range(requests):
        task = domain.make_task("train", 50_000 + i, seed)
        started = time.monotonic()
        reply = client.chat.completions.create(
            model="app", messages=[{"role": "user", "content": task["prompt"]}],
            temperature=0.7, max_tokens=64, seed=seed * 1000 + i, logprobs=True)
        latency = time.monotonic() - started
        text = reply.choices[0].message.content
        ok = verifier(task, text).verdict == "pass"
        body = {"interaction_id": reply.id, "label": "up"} if ok else \
            {"interaction_id": reply.id, "label": "down", "correction": str(task["answer"])}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/feedback",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()
        seen.append({"id": reply.id, "text": text, "ok": ok, "latency_s": latency,
                     "logprobs": [t.logprob for t in reply.choices[0].logprobs.content]})
    return seen


def check_recorded(records: Path, seen: list[dict], model: str) -> dict:
    import torch

    from flywheel.schemas import read_table
    from flywheel.policy.backends import POLICIES
    rows = {r["interaction_id"]: r for r in
            read_table(str(records / "tables" / "interactions"), "interactions").to_pylist()}
    feedback = read_table(str(records / "tables" / "feedback"), "feedback").num_rows
    same = sum(rows[s["id"]]["response"] == s["text"]
               and rows[s["id"]]["response_logprobs"] == s["logprobs"] for s in seen)
    policy = POLICIES.get("hf").create({"model": model}, seed=0)
    worst = 0.0
    for s in seen[:8]:  # the trainer's scoring of the recorded ids, at their sampling temperature
        r = rows[s["id"]]
        ids = torch.tensor([r["prompt_token_ids"] + r["response_token_ids"]])
        with torch.no_grad():
            lp = policy.token_logprobs(ids, torch.ones_like(ids, dtype=torch.bool),
                                       torch.tensor([r["sampling_temperature"]]))[
                0, len(r["prompt_token_ids"]) - 1:]
        worst = max(worst, max(abs(a - b) for a, b in zip(lp.tolist(), r["response_logprobs"])))
    return {"rows": len(rows), "feedback_rows": feedback, "same_text_and_logprobs": same,
            "max_abs_logprob_diff_rescored": worst}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    random.seed(args.seed)
    out = Path(args.out or tempfile.mkdtemp(prefix="flywheel-data-"))
    records, imported, run = out / "records", out / "imported", out / "run"
    port = free_port()

    t0 = time.monotonic()
    server = start_server(args.model, records, port)
    print(f"1. flywheel serve --model {args.model}: up in {time.monotonic() - t0:.0f} s")
    seen = application(port, args.requests, args.seed)
    server.send_signal(signal.SIGTERM)
    print(server.communicate(timeout=120)[0].strip().splitlines()[-1])
    good = sum(s["ok"] for s in seen)
    print(f"2. {len(seen)} requests through the openai client, median latency "
          f"{sorted(s['latency_s'] for s in seen)[len(seen) // 2]:.2f} s; the user's checks: "
          f"{good} up, {len(seen) - good} down with a correction")
    checked = check_recorded(records, seen, args.model)
    print(f"3. recorded: {checked}")

    env = {**os.environ, "GRPC_VERBOSITY": "ERROR"}
    imp = subprocess.run([sys.executable, "-m", "flywheel.cli.main", "import", str(records),
                          "--out", str(imported), "--as", "tasks,sft,pairs", "--domain",
                          "chat_arith", "--field", "answer=correction|response"],
                         capture_output=True, text=True, env=env)
    print(f"4. flywheel import (exit {imp.returncode}):\n{imp.stdout.strip()}")
    tasks = (imported / "tasks.jsonl").read_text().splitlines()
    t1 = time.monotonic()
    ran = subprocess.run([sys.executable, "-m", "flywheel.cli.main", "run", "--run-dir", str(run),
                          "--policy", "hf", "--model", args.model, "--domains", "chat_arith",
                          "--tasks", str(imported / "tasks.jsonl"), "--tasks-per-domain", "0",
                          "--heldout-per-domain", "16", "--n-samples", "4", "--iterations", "1",
                          "--set", "rollout.max_batch_size=64", "--set", "train.micro_tokens=1024",
                          "--seed", str(args.seed)], capture_output=True, text=True, env=env)
    from flywheel.reports.sql import query
    _, rows = query(str(run), "SELECT count(DISTINCT task_id), count(*), avg(reward_raw), "
                              "bool_and(task_id LIKE 'imp-%') FROM trajectories")
    print(f"5. flywheel run --tasks imported (exit {ran.returncode}, {time.monotonic() - t1:.0f} s): "
          f"{len(tasks)} imported tasks -> trajectories of {rows[0][0]} tasks, {rows[0][1]} "
          f"attempts, mean reward {rows[0][2]:.3f}, all imported ids: {rows[0][3]}")
    ok = (checked["same_text_and_logprobs"] == len(seen) == checked["rows"]
          and checked["max_abs_logprob_diff_rescored"] < 1e-3 and imp.returncode == 0
          and ran.returncode == 0 and rows[0][0] == len(tasks) and rows[0][3])
    print("all checks passed" if ok else f"A CHECK FAILED; run stderr tail:\n{ran.stderr[-3000:]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
