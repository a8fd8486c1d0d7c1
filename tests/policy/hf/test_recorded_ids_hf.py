"""Recorded ids spell their text under a real byte-level BPE tokenizer (tiny-llama's, trained
locally): what "spell" means with specials, a chat template's tokens, a leading space and a
split other than the tokenizer's own (feedback/recorded_ids.py)."""
from flywheel.feedback.recorded_ids import SpellCheck
from flywheel.policy.backends import create_policy


def test_spelling_under_a_bpe_tokenizer(tiny_model_dir):
    policy = create_policy("hf", {"model": str(tiny_model_dir)}, seed=0)
    tok, check = policy.tokenizer, SpellCheck(policy)
    text = "The answer is 4."
    own = policy.encode_response(text)
    assert check.response(own, text) is None                       # as serve and rollout record
    assert check.response(own[:-1], text) is None                  # cut before its EOS
    by_char = [i for c in text for i in tok(c, add_special_tokens=False)["input_ids"]]
    assert check.response(by_char + own[-1:], text) is None        # another split, the same text
    assert check.response(own, " " + text) is not None            # a leading space is text
    assert check.response(policy.encode_response("rm -rf ~"), text) is not None
    start = tok.convert_tokens_to_ids("<|im_start|>")
    assert check.response([start, *own], text) is not None         # a template token inside
    assert check.response([*own[:-1], policy.pad_id, own[-1]], text) is not None
    assert check.response([*own, *own], text) is not None          # ids after the end
    assert check.response([*own[:-1], len(tok) + 5, own[-1]], text) is not None
    messages = [{"role": "user", "content": "2+2?"}]
    context = policy.encode_messages(messages)
    assert check.prompt(context, policy.encode_messages(messages)) is None
    assert check.prompt(policy.encode_messages([{"role": "user", "content": "3+3?"}]), context) is not None
