from flywheel.policy.backends.tiny.tokens import (
    BOS,
    EOS,
    PAD,
    VOCAB_SIZE,
    decode,
    encode_prompt,
    encode_response,
)


def test_round_trip_including_multibyte():
    for text in ["", "17+5=", "rev:abcd=", "héllo ✓"]:
        assert encode_prompt(text)[0] == BOS
        assert encode_response(text)[-1] == EOS
        assert decode(encode_prompt(text)) == text
        assert decode(encode_response(text)) == text


def test_decode_stops_at_eos_and_skips_specials():
    assert decode([BOS, ord("a"), PAD, 259, ord("b"), EOS, ord("c")]) == "ab"
    assert decode([0xE2, 0x9C]) == "\ufffd"  # a cut multi-byte char is replaced, not an error
    assert max(encode_prompt("\xff")) < VOCAB_SIZE
