"""Log-probabilities of an HF causal LM's tokens, never holding batch x length x vocabulary.

The sampler and the trainer both go through `head_logprobs` (hidden states -> tempered
log-softmax), so old and new log-probs are one function. `token_logprobs` runs the network's
body once for the whole batch, then the output head chunk by chunk over the positions asked
for (the responses'); with autograd on and more than one chunk, each chunk is checkpointed, so
backward keeps only the hidden states and recomputes one chunk's logits at a time (the
out-of-memory of peers: OpenRLHF#887, trl#3678).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

LOGITS_BUDGET = 1 << 24  # logits elements per chunk (64 MB in float32)


def head_logprobs(model, hidden: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """hidden (B, ..., H) -> float32 log_softmax(logits / T) (B, ..., V); T = 0 means greedy,
    scored at T = 1. Final-logit soft-capping (Gemma 2) is applied where the config asks."""
    logits = model.get_output_embeddings()(hidden).float()
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    t = torch.where(temperatures > 0, temperatures, torch.ones_like(temperatures)).float()
    return F.log_softmax(logits / t.view(-1, *([1] * (logits.dim() - 1))), dim=-1)


def positions(attn_mask: torch.Tensor) -> torch.Tensor:
    """Position of each token counted from its row's first real token (left padding allowed)."""
    return (attn_mask.long().cumsum(1) - 1).clamp(min=0)


def token_logprobs(model, input_ids: torch.Tensor, attn_mask: torch.Tensor,
                   temperatures: torch.Tensor, chunk: int = 0, score_from: int = 0) -> torch.Tensor:
    """input_ids (B, T) long, attn_mask (B, T) bool, temperatures (B,) -> (B, T-1) float32, entry
    t scoring input_ids[:, t+1]; `chunk` positions per head call (0: sized by LOGITS_BUDGET).

    The output head runs only from position `score_from` on (entries before it are 0, without a
    gradient): a trainer scoring responses skips the prompts, where the vocabulary-wide head is
    most of the cost. Chunks are checkpointed only when there is more than one; a single chunk
    fits the budget anyway, and recomputing it would cost one more head pass.
    """
    B, T = input_ids.shape
    score_from = max(0, min(int(score_from), T - 1))
    hidden = scored_hidden(model, input_ids, attn_mask, score_from)
    targets = input_ids[:, score_from + 1:]
    vocab = model.get_output_embeddings().weight.shape[0]
    chunk = chunk or max(1, LOGITS_BUDGET // max(1, B * vocab))
    temperatures = temperatures.to(hidden.device)
    n = T - 1 - score_from
    out = [hidden.new_zeros((B, score_from), dtype=torch.float32)] if score_from else []
    for s in range(0, n, chunk):
        args = (model, hidden[:, s : s + chunk], targets[:, s : s + chunk], temperatures)
        if torch.is_grad_enabled() and n > chunk:
            out.append(checkpoint(_chosen, *args, use_reentrant=False))
        else:
            out.append(_chosen(*args))
    return torch.cat(out, 1) if out else hidden.new_zeros((B, 0), dtype=torch.float32)


def scored_hidden(model, input_ids: torch.Tensor, attn_mask: torch.Tensor,
                  score_from: int) -> torch.Tensor:
    """The body's last hidden states at positions score_from .. T-2, (B, T-1-score_from, H).

    Rows that begin with the same score_from + 1 real tokens (a GRPO group: one prompt, several
    responses) run that prefix once: its keys and values are computed for the distinct prefixes,
    then repeated for each row, and the rest of each row runs against them. The same function
    of the weights, gradients included (they flow back through the repeat into the one prefix),
    at a fraction of the cost when prompts are most of the tokens. Gradient checkpointing
    (which turns the cache off) and rows with nothing in common take one plain pass.
    """
    B, T = input_ids.shape
    S = score_from + 1
    plain = S < 2 or S >= T or bool(getattr(model, "is_gradient_checkpointing", False) and model.training)
    if not plain and bool(attn_mask[:, :S].all()):
        prefixes, inverse = torch.unique(input_ids[:, :S], dim=0, return_inverse=True)
        if len(prefixes) < B:
            from transformers import DynamicCache
            cache = DynamicCache(config=model.config)
            where = torch.arange(S, device=input_ids.device)
            head = model.base_model(input_ids=prefixes, attention_mask=torch.ones_like(prefixes),
                                    position_ids=where.expand(len(prefixes), S),
                                    past_key_values=cache, use_cache=True).last_hidden_state
            cache.reorder_cache(inverse)
            tail = model.base_model(input_ids=input_ids[:, S:], attention_mask=attn_mask.long(),
                                    position_ids=positions(attn_mask)[:, S:],
                                    past_key_values=cache, use_cache=True).last_hidden_state
            return torch.cat([head[inverse, -1:], tail[:, :-1]], 1)
    hidden = model.base_model(input_ids=input_ids, attention_mask=attn_mask.long(),
                              position_ids=positions(attn_mask), use_cache=False).last_hidden_state
    return hidden[:, score_from:-1]


def _chosen(model, hidden: torch.Tensor, targets: torch.Tensor, temperatures: torch.Tensor):
    logp = head_logprobs(model, hidden, temperatures)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
