"""The supervised warm start: imitate domain demonstrations until the policy is a useful start.

RL learns nothing from groups whose attempts all fail, so the tiny policy first imitates correct
demonstrations. How long is decided by measurement (FIELD_NOTES): every `eval_every` steps greedy
pass@1 is measured on a validation range of the *training* split (the held-out split is never
looked at), leaving headroom for RL.

The stop is per domain (`domain_target`, 0.25 by default): a domain whose validation pass@1 has
reached the target retires (it keeps `RETIRED_SHARE` of the demonstrations, so it is not
forgotten while the others catch up) and the warm start ends once every domain has. A mean
target lets one easy domain carry the mean while another starts RL at zero (no signal) and a
third starts saturated (no headroom); per-domain targets start every domain where RL has both.
`domain_target = 0` restores the mean rule: stop once the mean over domains reaches
`target_mean_pass` (runs before 2026-12-06).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import torch

from flywheel.domains.registry import get_domain
from flywheel.settings.config import RunConfig, parse_options
from flywheel.pipelines.demonstrations import demonstrated
from flywheel.pipelines.plain_rollout import pass_rate_by_domain, plain_rollout
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.policy.device import pick_device
from flywheel.trainer.supervised import supervised_step
from flywheel.transforms.generate import fit_prompt

VALIDATION_OFFSET = 10_000_000   # validation tasks: train split, an index range rollouts never reach
DEMONSTRATION_OFFSET = 20_000_000
ADAMW_BETAS, ADAMW_WEIGHT_DECAY = (0.9, 0.999), 0.0  # AdamW's defaults (RL uses TrainConfig's)
RETIRED_SHARE = 0.1  # of each batch's demonstrations, for the domains past their target


def has_demonstrations(domain, seed: int) -> bool:
    """Whether a domain can show a correct response (dataset domains of user files may not)."""
    try:
        domain.demonstration(domain.make_task("train", DEMONSTRATION_OFFSET, seed), random.Random(0))
        return True
    except (NotImplementedError, RuntimeError, KeyError, ValueError):
        return False


def _pick(domains: list, retired: set[str], rng: random.Random):
    """A domain for one demonstration: one still short of its target, or (RETIRED_SHARE of the
    time, or when none is short) one that has reached it."""
    active = [d for d in domains if d.name not in retired]
    done = [d for d in domains if d.name in retired]
    return rng.choice(done if not active or (done and rng.random() < RETIRED_SHARE) else active)


def warm_start(config: RunConfig, progress: Callable[[int, dict], None] | None = None):
    """Train a fresh policy on demonstrations; returns (policy, report dict, optimizer). The
    optimizer's state goes into the initial checkpoint when `warm_start.carry_optimizer`, so the
    first RL update continues Adam's moments instead of starting them afresh (a fresh Adam moves
    every weight by about the learning rate on its first step, whatever the gradient's size)."""
    ws, seed = config.warm_start, config.seed
    torch.manual_seed(seed)
    device = pick_device()
    policy = create_policy(config.policy.backend, config.policy.parsed_options(), seed, device)
    optimizer = build_optimizer(policy, lr=ws.lr, betas=ADAMW_BETAS, weight_decay=ADAMW_WEIGHT_DECAY)
    domains = [d for d in map(get_domain, config.rollout.domains) if has_demonstrations(d, seed)]
    if not domains or ws.max_steps == 0:
        policy.module.eval()
        return policy, {"steps": 0, "validation_pass@1": {}, "history": [],
                        "skipped": "no domain with demonstrations" if ws.max_steps else "max_steps=0"
                        }, None
    validation = [d.make_task("train", VALIDATION_OFFSET + i, seed)
                  for d in domains for i in range(ws.eval_tasks)]
    rng = random.Random(f"{seed}:warm_start")
    context = policy.context
    limits = config.episode.limits()
    history, step, pass_rates, retired = [], 0, {}, set()
    for step in range(1, ws.max_steps + 1):
        prompts, answers, masks = [], [], []
        for _ in range(ws.batch_size):
            domain = rng.choice(domains) if not retired else _pick(domains, retired, rng)
            task = domain.make_task("train", DEMONSTRATION_OFFSET + rng.randrange(10**6), seed)
            answer, mask = demonstrated(policy, domain, task, rng, limits)
            answer, mask = answer[: context // 2], mask[: context // 2]
            answers.append(answer)
            masks.append(mask)
            prompts.append(fit_prompt(policy.encode_prompt(task["prompt"]), context - len(answer)))
        policy.module.train()
        loss = supervised_step(policy, optimizer, prompts, answers, device, masks)
        if step % ws.eval_every == 0 or step == ws.max_steps:
            policy.module.eval()
            scored, _ = plain_rollout(policy, validation, n_samples=1, temperature=0.0, seed=seed,
                                      mode="validation", sandbox=config.rollout.sandbox,
                                      sandbox_options=parse_options(config.rollout.sandbox_options))
            pass_rates = pass_rate_by_domain(scored)
            mean = sum(pass_rates.values()) / len(pass_rates)
            history.append({"step": step, "loss": loss, **pass_rates})
            if progress:
                progress(step, {"loss": loss, **pass_rates})
            if ws.domain_target > 0:
                retired |= {d for d, rate in pass_rates.items() if rate >= ws.domain_target}
                if len(retired) >= len(domains):
                    break
            elif mean >= ws.target_mean_pass:
                break
    policy.module.eval()
    return policy, {"steps": step, "validation_pass@1": pass_rates, "history": history}, optimizer
