"""Byte-level tokenizer: every UTF-8 byte is a token, plus a few specials.

No vocabulary file to ship or version: any text round-trips, and the tiny policy learns
arithmetic and string tasks one character at a time.
"""
BOS, EOS, PAD = 256, 257, 258
VOCAB_SIZE = 260  # 259 is reserved (never produced, never sampled)
SPECIALS = (BOS, EOS, PAD, 259)

# Written into checkpoints so a loader can check it speaks the same tokenizer.
TOKENIZER_SPEC = {"kind": "bytes", "bos": BOS, "eos": EOS, "pad": PAD, "vocab_size": VOCAB_SIZE}


def encode_prompt(text: str) -> list[int]:
    """[BOS] + the UTF-8 bytes of `text`: what the policy is conditioned on."""
    return [BOS] + list(text.encode("utf-8"))


def encode_response(text: str) -> list[int]:
    """The UTF-8 bytes of `text` + [EOS]: what the policy should emit."""
    return list(text.encode("utf-8")) + [EOS]


def encode_observation(text: str) -> list[int]:
    """What an episode shows the policy after its action: the observation's bytes, then ":" (the
    end of every prompt), so the next action starts where a first one does."""
    return list(f"{text}:".encode("utf-8"))


def decode(ids) -> str:
    """Text of `ids` up to the first EOS; specials are skipped, bad UTF-8 is replaced."""
    out = bytearray()
    for i in ids:
        i = int(i)
        if i == EOS:
            break
        if i < 256:
            out.append(i)
    return out.decode("utf-8", errors="replace")
