"""Batched sampling from the tiny policy, reproducible row by row.

Row i draws its uniforms from `np.random.default_rng(seeds[i])` and picks its token by inverse
CDF, so a row's sample depends on its own prompt, temperature and seed only: never on which
other rows share the batch or in what order (Beam may bundle elements any way it likes).
Contexts are tiny (<= 48 tokens), so each step recomputes the forward pass over the live rows
instead of keeping a KV cache.
"""
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import torch

from flywheel.trainer.model import TinyPolicy, policy_logprobs
from flywheel.trainer.tokens import EOS, PAD


@dataclass
class Sample:
    token_ids: list[int]
    logprobs: list[float]  # of each token under the sampling distribution (T=1 when greedy)
    finish_reason: Literal["stop", "length"]


@torch.no_grad()
def sample(
    model: TinyPolicy,
    prompts: list[list[int]],
    temperatures: Sequence[float],
    seeds: Sequence[int],
    max_new_tokens: int,
) -> list[Sample]:
    """Continue each prompt until EOS, `max_new_tokens`, or a full context; temperature 0 = greedy."""
    n = len(prompts)
    assert len(temperatures) == n and len(seeds) == n
    if n == 0:
        return []
    context = model.cfg.context
    device = next(model.parameters()).device
    lengths = [len(p) for p in prompts]
    if max(lengths) > context:
        raise ValueError(f"prompt of {max(lengths)} tokens exceeds context {context}")
    if min(lengths) == 0:
        raise ValueError("empty prompt (encode_prompt adds BOS)")

    # Right-aligned buffer: row i's tokens end at column `width`, padding on the left.
    width = max(lengths) + max_new_tokens
    ids = torch.full((n, width), PAD, dtype=torch.long)
    real = torch.zeros((n, width), dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, max(lengths) - len(p) : max(lengths)] = torch.tensor(p, dtype=torch.long)
        real[i, max(lengths) - len(p) : max(lengths)] = True
    ids, real = ids.to(device), real.to(device)
    uniforms = torch.tensor(
        np.stack([np.random.default_rng(s).random(max_new_tokens) for s in seeds]), device=device
    )
    temps = torch.tensor(temperatures, dtype=torch.float32, device=device)
    greedy = temps <= 0

    out = [Sample([], [], "length") for _ in range(n)]
    live = torch.tensor([length < context for length in lengths], device=device)
    lengths_t = torch.tensor(lengths, device=device)
    end = max(lengths)
    for step in range(max_new_tokens):
        rows = live.nonzero().squeeze(1)
        if len(rows) == 0:
            break
        span = int(lengths_t[rows].max())  # the longest live row fits in the last `span` columns
        logits = model(ids[rows, end - span : end], real[rows, end - span : end])[:, -1]
        logp = policy_logprobs(logits.float(), temps[rows])
        tok = _pick(logp, uniforms[rows, step], greedy[rows])
        tok_logp = logp.gather(1, tok[:, None]).squeeze(1)
        ids[rows, end], real[rows, end] = tok, True
        end += 1
        lengths_t[rows] += 1
        for r, t, lp in zip(rows.tolist(), tok.tolist(), tok_logp.tolist()):
            out[r].token_ids.append(t)
            out[r].logprobs.append(lp)
            if t == EOS:
                out[r].finish_reason = "stop"
        live[rows] = (tok != EOS) & (lengths_t[rows] < context)
    return out


def _pick(logp: torch.Tensor, u: torch.Tensor, greedy: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw per row (logp (B, V), u (B,) in [0, 1)); argmax where greedy."""
    cdf = logp.double().exp().cumsum(1)
    x = (u * cdf[:, -1]).unsqueeze(1)  # scale by the total so rounding never picks past the end
    drawn = torch.searchsorted(cdf, x, right=True).squeeze(1).clamp(max=logp.shape[1] - 1)
    return torch.where(greedy, logp.argmax(1), drawn)
