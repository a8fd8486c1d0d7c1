import numpy as np
import pytest
import torch

from flywheel.policy.backends.tiny.model import TinyConfig, build_transformer
from flywheel.policy.backends.tiny.sampling import sample
from flywheel.policy.backends.tiny.policy import TinyPolicy
from flywheel.policy.backends.tiny.tokens import BOS, EOS, PAD, encode_prompt
from flywheel.trainer.trajectory_batches import make_batch

PROMPTS = [encode_prompt(t) for t in ["17+5=", "rev:abcd=", "9=", "expr for 14:", "a", "12+30="]]


def _model():
    return build_transformer(TinyConfig(), 3).eval()


@pytest.mark.parametrize("threads", [1, 2])
def test_a_row_depends_only_on_its_seed_and_prompt(threads):
    torch.set_num_threads(threads)  # the fixture in conftest.py restores it
    model = _model()
    temps, seeds = [1.0, 0.7, 1.3, 1.0, 0.0, 1.0], [11, 12, 13, 14, 15, 16]
    batch = sample(model, PROMPTS, temps, seeds, max_new_tokens=12)
    perm = np.random.default_rng(0).permutation(len(PROMPTS))
    shuffled = sample(
        model, [PROMPTS[i] for i in perm], [temps[i] for i in perm], [seeds[i] for i in perm], 12
    )
    for j, i in enumerate(perm):
        alone = sample(model, [PROMPTS[i]], [temps[i]], [seeds[i]], 12)[0]
        assert alone.token_ids == batch[i].token_ids == shuffled[j].token_ids
        assert alone.logprobs == batch[i].logprobs == shuffled[j].logprobs  # bit for bit
    other_seed = sample(model, PROMPTS[:1], [1.0], [999], 12)[0]
    assert other_seed.token_ids != batch[0].token_ids


def test_sample_shapes_stops_and_banned_tokens():
    out = sample(_model(), PROMPTS, [1.5] * 6, list(range(6)), max_new_tokens=30)
    for s in out:
        assert len(s.token_ids) == len(s.logprobs) <= 30
        assert not {BOS, PAD, 259} & set(s.token_ids)
        if s.finish_reason == "stop":
            assert s.token_ids[-1] == EOS and EOS not in s.token_ids[:-1]
        else:
            assert EOS not in s.token_ids


def test_full_context_stops_with_length():
    model = _model()
    prompt = [BOS] + [97] * (model.cfg.context - 3)
    s = sample(model, [prompt, [BOS]], [1.0, 1.0], [0, 1], max_new_tokens=40)[0]
    assert len(prompt) + len(s.token_ids) <= model.cfg.context
    assert s.finish_reason == "length" or s.token_ids[-1] == EOS


def test_greedy_is_argmax():
    model = _model()
    s = sample(model, PROMPTS[:1], [0.0], [0], max_new_tokens=8)[0]
    ids = list(PROMPTS[0])
    for t in s.token_ids:
        logits = model(torch.tensor([ids]))[0, -1]
        logits[[BOS, PAD, 259]] = float("-inf")
        assert t == int(logits.argmax())
        ids.append(t)


def test_logprobs_match_the_trainers_recomputation():
    model = _model()
    temps = [1.0, 0.7, 0.0, 1.3, 1.0, 2.0]
    out = sample(model, PROMPTS, temps, list(range(6)), max_new_tokens=12)
    rows = [
        dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
             advantage=1.0, sampling_temperature=t)
        for p, s, t in zip(PROMPTS, out, temps)
    ]
    b = make_batch(rows, PAD)
    with torch.no_grad():
        new = TinyPolicy(model).token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"])
    m = b["response_mask"].bool()
    torch.testing.assert_close(new[m], b["old_logprobs"][m], atol=1e-5, rtol=0)
