"""The tiny backend's network: a byte-level causal transformer small enough to train on 2 CPU cores.

nanoGPT's shape (pre-LN blocks, learned positions, tied embeddings) plus one addition that batched
sampling needs: an `attn_mask` for left padding, under which a padded row gives the same logits
as the row alone (positions count from the first real token; padded keys are never attended).
"""
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F

from flywheel.policy.backends.tiny.tokens import EOS, SPECIALS, VOCAB_SIZE


@dataclass(frozen=True)
class TinyConfig:
    """The architecture; its defaults are the run's unless `--policy-options` says otherwise."""
    vocab_size: int = VOCAB_SIZE
    d_model: int = 64
    n_layers: int = 3
    n_heads: int = 4
    context: int = 48

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> "TinyConfig":
        """From config.json or the run's policy options; an unknown key is an error."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"unknown tiny policy option(s) {unknown}; known: {', '.join(known)}")
        return cls(**d)


class SelfAttention(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x, mask, kv):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        if kv is not None:  # KV cache: prepend what earlier calls stored, store the result
            if kv:
                k, v = torch.cat([kv[0], k], 2), torch.cat([kv[1], v], 2)
            kv[:] = [k, v]
        if mask is None:  # fused causal kernel when nothing is padded
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False),
        )

    def forward(self, x, mask, kv):
        x = x + self.attn(self.ln1(x), mask, kv)
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        assert cfg.d_model % cfg.n_heads == 0
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # weight tying: fewer params, better small models

    def forward(
        self, idx: torch.Tensor, attn_mask: torch.Tensor | None = None, cache: list | None = None
    ) -> torch.Tensor:
        """idx (B, T) token ids, attn_mask (B, T) True at real tokens -> logits (B, T, vocab).

        cache (sampling only): pass an empty list to fill it with each layer's keys and values;
        pass it back with the next tokens as idx (B, T') and attn_mask over all tokens so far.
        """
        B, T = idx.shape
        past = cache[0][0].shape[2] if cache else 0
        if cache is not None and not cache:
            cache.extend([] for _ in self.blocks)
        if attn_mask is None and past == 0:
            assert T <= self.cfg.context, f"sequence of {T} tokens exceeds context {self.cfg.context}"
            pos, mask = torch.arange(T, device=idx.device).expand(B, T), None
        else:
            if attn_mask is None:
                attn_mask = torch.ones(B, past + T, dtype=torch.bool, device=idx.device)
            pos = (attn_mask.long().cumsum(1) - 1).clamp(min=0)[:, past:]
            assert int(pos.max()) < self.cfg.context, f"more than {self.cfg.context} tokens in a row"
            # A query sees earlier real keys; it also sees itself so that a padding query has no
            # empty softmax (NaN). Real queries never see padding.
            q_idx = torch.arange(past, past + T, device=idx.device)[:, None]
            k_idx = torch.arange(past + T, device=idx.device)[None, :]
            mask = (((k_idx <= q_idx) & attn_mask[:, None, :]) | (k_idx == q_idx))[:, None]
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, cache[i] if cache is not None else None)
        return self.head(self.ln_f(x))


def build_transformer(cfg: TinyConfig, seed: int) -> TinyTransformer:
    """A freshly initialised network; the same (cfg, seed) gives the same weights anywhere."""
    model = TinyTransformer(cfg)
    g = torch.Generator().manual_seed(seed)
    resid_std = 0.02 / math.sqrt(2 * cfg.n_layers)  # GPT-2: residual writes scaled by depth
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                continue  # LayerNorm weights stay 1, biases 0
            std = resid_std if name.endswith(("proj.weight", "mlp.2.weight")) else 0.02
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return model


BANNED = [t for t in SPECIALS if t != EOS]


def policy_logprobs(logits: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """The sampling distribution as log-probs: log_softmax(logits / T) with BOS/PAD/259 banned.

    logits (B, ..., V), temperatures (B,) with 0 meaning greedy (scored at T=1) -> (B, ..., V).
    The sampler and the trainer both call this, so old and new log-probs are the same function.
    """
    t = torch.where(temperatures > 0, temperatures, torch.ones_like(temperatures)).to(logits.dtype)
    logits = logits / t.view(-1, *([1] * (logits.dim() - 1)))
    logits = logits.index_fill(-1, torch.tensor(BANNED, device=logits.device), float("-inf"))
    return F.log_softmax(logits, dim=-1)
