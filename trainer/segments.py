"""An episode's context segments as training sequences: each trained on exactly the ids it saw.

A long episode whose context was rebuilt (transforms/context_strategies.py) carries its earlier
contexts in `segments` and its last in the row's own token columns. `segment_rows` gives one
row per segment, with the episode's advantage and the turns whose actions that segment holds
(their token offsets are the segment's own), so `make_batch` and the per-turn credit treat each
as an ordinary sequence. A segment that holds no action but ids the policy sampled (a summary
written on a cut view of the context) is trained too, with the episode's advantage. A row
without segments is itself.
"""

from __future__ import annotations

TOKEN_FIELDS = ("prompt_token_ids", "response_token_ids", "response_logprobs", "response_mask")


def segment_rows(row: dict) -> list[dict]:
    """`row` as one training row per context segment (segments with nothing sampled dropped)."""
    segments = row.get("segments") or []
    if not segments:
        return [row]
    turns = row.get("turns") or []
    out = []
    for k, segment in enumerate([*segments, {f: row[f] for f in TOKEN_FIELDS}]):
        own = [t for t in turns if (t.get("segment") or 0) == k]
        if own or any(segment["response_mask"] or ()):
            out.append({**row, **{f: segment[f] for f in TOKEN_FIELDS}, "turns": own, "segments": []})
    return out
