"""Recorded token ids are trusted only when they spell the recorded text.

    check = SpellCheck(policy)                    # the policy about to train
    check.response(ids, "4")                      # None: the ids spell "4"; else why not
    check.prompt(ids, policy.encode_prompt(q))    # None: the context's own ids (or a rollout's cut)

A stored row (an imported interaction, a run folder someone else wrote, a reviewed attempt)
carries a text and the ids said to spell it: people read the text, the trainer reads the ids.
The tokenizer digest a row names is public, so naming it proves nothing; before stored ids
re-enter training they are checked under the policy about to train, whose tokenizer the row
names (a row naming another is re-encoded anyway).

Response ids (what the trainer teaches) are trusted when every id is a text-bearing token of
the policy (none of its tokenizer's special or added-special ids, and one whose own decode is
not empty, since `decode` leaves specials out), but for one EOS at the very end, and their
decode is the recorded text exactly: Flywheel records a response's text as `policy.decode` of
the ids sampled (serve, rollout), so a genuine row always passes, and a text a reader saw is the
text trained. A decode holding U+FFFD (bytes that are no UTF-8, a lossy decode) is trusted only
when the ids are the policy's own encoding of the text. Context ids (prompts, chat templates:
specials belong there) are trusted when they are the policy's own encoding of the recorded
context, or a rollout's cut of it (`fit_prompt`: the first token and the tail).

Ids that fail are replaced by the policy's encoding of the text and the row is flagged
(`ids_reencoded`); where no text can stand in (an episode's actions between observations),
the row is left out with the reason.
"""
from __future__ import annotations

from collections.abc import Sequence

REPLACEMENT = "\ufffd"
DECODE_ERRORS = (ValueError, TypeError, OverflowError, IndexError, KeyError)


def _int_list(ids) -> list[int] | None:
    """`ids` as a list of ints (bools and other types refused), else None."""
    if not isinstance(ids, (list, tuple)):
        return None
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return None
    return list(ids)


class SpellCheck:
    """The spelling checks of one policy, remembering which ids bear text."""

    def __init__(self, policy):
        self.policy = policy
        self.eos = set(int(i) for i in policy.eos_ids)
        tokenizer = getattr(policy, "tokenizer", None)
        self.specials = set(getattr(tokenizer, "all_special_ids", None) or ())
        added = getattr(tokenizer, "added_tokens_decoder", None) or {}  # hf: {id: AddedToken}
        self.specials |= {int(i) for i, t in added.items() if getattr(t, "special", False)}
        self.size = len(tokenizer) if tokenizer is not None and hasattr(tokenizer, "__len__") else None
        self.bearing: dict[int, bool] = {}

    def _bears_text(self, i: int) -> bool:
        if i not in self.bearing:
            if i < 0 or i in self.eos or i in self.specials or (self.size is not None and i >= self.size):
                self.bearing[i] = False
            else:
                try:
                    self.bearing[i] = self.policy.decode([i]) != ""
                except DECODE_ERRORS:
                    self.bearing[i] = False
        return self.bearing[i]

    def response(self, ids, text) -> str | None:
        """None when `ids` spell `text` (see the module's rule), else why not."""
        ids = _int_list(ids)
        if ids is None or not ids:
            return "the recorded ids are not a list of token ids"
        if not isinstance(text, str):
            return "no recorded text to check the ids against"
        body = ids[:-1] if ids[-1] in self.eos else ids
        odd = next((i for i in body if not self._bears_text(i)), None)
        if odd is not None:
            return f"the recorded ids hold id {odd}, a special or unknown token, before their end"
        try:
            spelled = self.policy.decode(body)
        except DECODE_ERRORS as e:
            return f"the recorded ids do not decode ({type(e).__name__})"
        if spelled != text:
            return "the recorded ids do not spell the recorded text"
        if REPLACEMENT in spelled:
            own = list(self.policy.encode_response(text))
            own = own[:-1] if own and own[-1] in self.eos else own
            if body != own:
                return "the recorded ids decode lossily (U+FFFD) and are not the text's own ids"
        return None

    def prompt(self, ids, expected: Sequence[int]) -> str | None:
        """None when `ids` are `expected` (the context's own ids) or a rollout's cut of them."""
        ids, expected = _int_list(ids), list(expected)
        if ids is None or not ids:
            return "the recorded context ids are not a list of token ids"
        if ids == expected:
            return None
        if 1 < len(ids) < len(expected) and ids == expected[:1] + expected[len(expected) - len(ids) + 1:]:
            return None
        return "the recorded context ids are not the context's own ids"

    def episode(self, segments: list[dict], turns: list[dict]) -> str | None:
        """None when, in each segment ({response_token_ids, response_mask, summary}), every
        trained id (mask 1) lies in one of its turns' actions, each action's ids spelling the
        turn's `action`, and the trained ids outside actions spell the segment's `summary`."""
        for k, segment in enumerate(segments):
            ids = _int_list(segment.get("response_token_ids"))
            if ids is None:
                return f"segment {k}: the recorded ids are not a list of token ids"
            mask = segment.get("response_mask")
            mask = [1] * len(ids) if mask is None else list(mask)
            if len(mask) != len(ids):
                return f"segment {k}: a mask of {len(mask)} for {len(ids)} ids"
            covered = [False] * len(ids)
            for turn in (t for t in turns if (t.get("segment") or 0) == k):
                start, end = turn.get("action_start"), turn.get("action_end")
                if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(ids)):
                    return f"segment {k}: a turn's action offsets are not inside its ids"
                why = self.response(ids[start:end], turn.get("action"))
                if why:
                    return f"segment {k}, a turn's action: {why}"
                covered[start:end] = [True] * (end - start)
            rest = [i for i, m, c in zip(ids, mask, covered) if m and not c]
            if rest:
                why = self.response(rest, segment.get("summary"))
                if why:
                    return f"segment {k}, ids trained outside any action: {why}"
        return None
