"""Trajectory rows -> training tensors.

The trainer reads `<run>/tables/trajectories/iteration=K` with the one table reader
(`flywheel.schemas.read_table`, which checks schema versions); `make_batch` turns its rows into
right-padded tensors aligned with next-token targets, the advantages per token as the run's
credit assigns them (trainer/credit.py).
"""
import torch

from flywheel.trainer.credit import token_advantages

TRAIN_COLUMNS = [
    "prompt_token_ids",
    "response_token_ids",
    "response_logprobs",
    "response_mask",
    "advantage",
    "sampling_temperature",
    "filtered",
    "turns",
    "segments",
    "checkpoint_digest",  # which weights sampled the row (off-policy correction, off_policy.py)
]


def make_batch(rows: list[dict], pad_id: int, device: str | torch.device = "cpu",
               credit: str = "outcome") -> dict[str, torch.Tensor]:
    """Rows -> right-padded tensors. With L = longest prompt+response:

    input_ids (B, L) long, filled with the policy's `pad_id`; attn_mask (B, L) bool;
    response_mask (B, L-1) float, 1 where target input_ids[:, t+1] is a response token the
    policy sampled (an episode's observation tokens are 0: the environment wrote them);
    old_logprobs (B, L-1) float, the sampler's log-probs at those positions, 0 elsewhere;
    advantages (B, L-1) float, per token as `credit` (a name in CREDITS) assigns them
    (credit.token_advantages: outcome, every token its row's; turn, each episode action's tokens
    their turn's); temperatures (B,) float.
    """
    seqs = [list(r["prompt_token_ids"]) + list(r["response_token_ids"]) for r in rows]
    B, L = len(rows), max(len(s) for s in seqs)
    input_ids = torch.full((B, L), pad_id, dtype=torch.long)
    attn_mask = torch.zeros((B, L), dtype=torch.bool)
    response_mask = torch.zeros((B, L - 1))
    old_logprobs = torch.zeros((B, L - 1))
    for i, (r, s) in enumerate(zip(rows, seqs)):
        p, n = len(r["prompt_token_ids"]), len(r["response_token_ids"])
        assert p >= 1, "a prompt holds at least one token"
        input_ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        attn_mask[i, : len(s)] = True
        response_mask[i, p - 1 : p - 1 + n] = 1.0  # position t predicts token t+1
        if r.get("response_mask") is not None:  # an episode: observations are not the policy's
            response_mask[i, p - 1 : p - 1 + n] = torch.tensor(list(r["response_mask"]),
                                                               dtype=torch.float32)
        if n:
            old_logprobs[i, p - 1 : p - 1 + n] = torch.tensor(list(r["response_logprobs"]))
    batch = {
        "input_ids": input_ids,
        "attn_mask": attn_mask,
        "response_mask": response_mask,
        "old_logprobs": old_logprobs,
        "advantages": token_advantages(rows, credit, L),
        "temperatures": torch.tensor([float(r["sampling_temperature"]) for r in rows]),
    }
    return {k: v.to(device) for k, v in batch.items()}


def first_scored(rows: list[dict]) -> int:
    """The first position make_batch's response_mask can be 1 at (the shortest prompt's last
    token): `token_logprobs(..., score_from=first_scored(rows))` skips the prompts' head."""
    return max(0, min(len(r["prompt_token_ids"]) for r in rows) - 1)

