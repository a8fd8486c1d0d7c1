"""Batched sampling from an HF causal LM with a KV cache, each row reproducible from its seed.

Row i draws its uniforms from `np.random.default_rng(seeds[i])` and picks its token by inverse
CDF (over the top-p nucleus when top_p < 1), so its tokens depend on its own prompt,
temperature and seed, not on the other rows (Beam batches elements as it likes). Left padding
changes float32 results by ~1e-7 (batch shape), so a logprob may differ in its last bit between
batchings; the ids only if a uniform lands within that of a CDF boundary.
The recorded logprob is that of the full tempered distribution (what `token_logprobs` scores),
not of the nucleus: top-p is a sampling filter, as in vLLM and verl.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from flywheel.policy.backends.hf.logprobs import head_logprobs, positions
from flywheel.policy.policy import Sample
from flywheel.policy.rollout_engine import InProcessEngine


@torch.no_grad()
def sample(model, prompts: Sequence[Sequence[int]], temperatures: Sequence[float],
           seeds: Sequence[int], max_new_tokens: int, *, eos_ids: Sequence[int], pad_id: int,
           context: int, top_p: float = 1.0, stop_strings: Sequence[str] = (),
           decode: Callable[[list[int]], str] | None = None) -> list[Sample]:
    """Continue each prompt until an EOS id, a stop string (decoded with `decode`),
    `max_new_tokens` or a full `context`; temperature 0 = greedy."""
    from transformers import DynamicCache

    n = len(prompts)
    assert len(temperatures) == n and len(seeds) == n
    if n == 0:
        return []
    lengths = [len(p) for p in prompts]
    if min(lengths) == 0:
        raise ValueError("empty prompt: encode_prompt always gives at least one token")
    if max(lengths) >= context:
        raise ValueError(f"prompt of {max(lengths)} tokens leaves no room in context {context}")
    device = next(model.parameters()).device
    # Each distinct prompt is prefilled once (a GRPO group repeats one prompt n times), then its
    # keys and values are repeated for each of its rows.
    distinct: dict[tuple, int] = {}
    row_of = torch.tensor([distinct.setdefault(tuple(p), len(distinct)) for p in prompts],
                          device=device)
    width = max(lengths)
    ids = torch.full((len(distinct), width), pad_id, dtype=torch.long)
    real = torch.zeros((len(distinct), width), dtype=torch.long)
    for i, p in enumerate(distinct):
        ids[i, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
        real[i, width - len(p):] = 1
    ids, real = ids.to(device), real.to(device)
    uniforms = torch.tensor(np.stack([np.random.default_rng(s).random(max_new_tokens) for s in seeds]),
                            device=device)
    temps = torch.tensor(list(temperatures), dtype=torch.float32, device=device)
    greedy = temps <= 0
    eos = torch.tensor(sorted(set(eos_ids)), device=device)
    lengths_t = torch.tensor(lengths, device=device)
    live = torch.ones(n, dtype=torch.bool, device=device)
    longest_stop = max((len(s) for s in stop_strings), default=0)

    out = [Sample([], [], "length") for _ in range(n)]
    cache = DynamicCache(config=model.config)
    last = model.base_model(input_ids=ids, attention_mask=real, position_ids=positions(real),
                            past_key_values=cache, use_cache=True).last_hidden_state[row_of, -1]
    if len(distinct) < n:
        cache.reorder_cache(row_of)
    real = real[row_of]
    for step in range(max_new_tokens):
        logp = head_logprobs(model, last, temps)  # (B, V) float32
        tok = _pick(logp, uniforms[:, step], greedy, top_p)
        tok_logp = logp.gather(1, tok[:, None]).squeeze(1)
        stopped = torch.isin(tok, eos).tolist()
        tokens, token_logps = tok.tolist(), tok_logp.tolist()
        for r in live.nonzero().squeeze(1).tolist():
            out[r].token_ids.append(tokens[r])
            out[r].logprobs.append(token_logps[r])
            if stopped[r]:
                out[r].finish_reason = "stop"
            elif longest_stop and decode is not None:
                tail = decode(out[r].token_ids[-(longest_stop + 4):])
                if any(s in tail for s in stop_strings):
                    out[r].finish_reason, stopped[r] = "stop", True
        lengths_t += live
        live = live & ~torch.tensor(stopped, device=device) & (lengths_t < context)
        if step == max_new_tokens - 1 or not live.any():
            break
        # Finished rows keep stepping (cheaper than reshaping the cache) on masked-out tokens.
        next_pos = real.sum(1, keepdim=True)
        real = torch.cat([real, live[:, None].long()], 1)
        last = model.base_model(input_ids=tok[:, None], attention_mask=real, position_ids=next_pos,
                                past_key_values=cache, use_cache=True).last_hidden_state[:, -1]
    return out


def _pick(logp: torch.Tensor, u: torch.Tensor, greedy: torch.Tensor, top_p: float) -> torch.Tensor:
    """Inverse-CDF draw per row from logp (B, V) with u (B,) in [0, 1), within the smallest set
    of most likely tokens whose mass reaches top_p; argmax where greedy."""
    probs = logp.double().exp()
    order = None
    if top_p < 1.0:
        probs, order = probs.sort(1, descending=True)
        probs = probs * ((probs.cumsum(1) - probs) < top_p)  # the first token is always kept
    cdf = probs.cumsum(1)
    x = (u * cdf[:, -1]).unsqueeze(1)  # scale by the total so rounding never picks past the end
    drawn = torch.searchsorted(cdf, x, right=True).squeeze(1).clamp(max=logp.shape[1] - 1)
    if order is not None:
        drawn = order.gather(1, drawn[:, None]).squeeze(1)
    return torch.where(greedy, logp.argmax(1), drawn)


class HFEngine(InProcessEngine):
    """An hf policy's in-process rollout engine (policy/rollout_engine.py "hf"): `sample` above
    over its causal LM, with the policy's top_p, stop strings and max_new_tokens cap."""

    def draw(self, policy, prompts, temperatures, seeds, max_new_tokens) -> list[Sample]:
        options = policy.options
        if options.max_new_tokens:
            max_new_tokens = min(max_new_tokens, options.max_new_tokens)
        return sample(
            policy.causal_lm, prompts, temperatures, seeds, max_new_tokens, eos_ids=policy.eos_ids,
            pad_id=policy.pad_id, context=policy.context, top_p=options.top_p,
            stop_strings=options.stop_strings,
            decode=lambda ids: policy.tokenizer.decode(ids, skip_special_tokens=True))
