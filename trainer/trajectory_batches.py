"""Trajectory rows -> training tensors.

The trainer reads `<run>/tables/trajectories/iteration=K` with the one table reader
(`flywheel.schemas.read_table`, which checks schema versions); `make_batch` turns its rows into
right-padded tensors aligned with next-token targets.
"""
import torch

TRAIN_COLUMNS = [
    "prompt_token_ids",
    "response_token_ids",
    "response_logprobs",
    "response_mask",
    "advantage",
    "sampling_temperature",
    "filtered",
    "turns",
]


def make_batch(rows: list[dict], pad_id: int, device: str | torch.device = "cpu",
               credit: str = "outcome") -> dict[str, torch.Tensor]:
    """Rows -> right-padded tensors. With L = longest prompt+response:

    input_ids (B, L) long, filled with the policy's `pad_id`; attn_mask (B, L) bool;
    response_mask (B, L-1) float, 1 where target input_ids[:, t+1] is a response token the
    policy sampled (an episode's observation tokens are 0: the environment wrote them);
    old_logprobs (B, L-1) float, the sampler's log-probs at those positions, 0 elsewhere;
    advantages (B,) float, or with credit="turn" (B, L-1): each action token carries its turn's
    advantage (an episode's `turns[].advantage`; rows without turn advantages their own);
    temperatures (B,) float.
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
    advantages = torch.tensor([float(r["advantage"]) for r in rows])
    if credit == "turn":
        advantages = turn_advantages(rows, advantages, L)
    elif credit != "outcome":
        raise ValueError(f"unknown credit {credit!r}; expected outcome or turn")
    batch = {
        "input_ids": input_ids,
        "attn_mask": attn_mask,
        "response_mask": response_mask,
        "old_logprobs": old_logprobs,
        "advantages": advantages,
        "temperatures": torch.tensor([float(r["sampling_temperature"]) for r in rows]),
    }
    return {k: v.to(device) for k, v in batch.items()}


def first_scored(rows: list[dict]) -> int:
    """The first position make_batch's response_mask can be 1 at (the shortest prompt's last
    token): `token_logprobs(..., score_from=first_scored(rows))` skips the prompts' head."""
    return max(0, min(len(r["prompt_token_ids"]) for r in rows) - 1)


def turn_advantages(rows: list[dict], outcome: torch.Tensor, length: int) -> torch.Tensor:
    """(B, length-1): per-token advantages, each episode action's tokens at its turn's advantage
    (turns[].advantage over turns[].action_start/end); rows without them at their outcome one."""
    out = outcome[:, None].repeat(1, length - 1)
    for i, r in enumerate(rows):
        p = len(r["prompt_token_ids"])
        for turn in r.get("turns") or ():
            if turn.get("advantage") is not None and turn.get("action_start") is not None:
                out[i, p - 1 + turn["action_start"]: p - 1 + turn["action_end"]] = turn["advantage"]
    return out
