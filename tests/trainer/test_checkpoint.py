import pytest
import torch

from flywheel.trainer.checkpoint import checkpoint_exists, load_checkpoint, save_checkpoint
from flywheel.trainer.model import PolicyConfig, build_policy
from flywheel.trainer.train_step import TrainConfig, build_optimizer, supervised_step
from flywheel.trainer.tokens import encode_answer, encode_prompt


def _trained():
    model = build_policy(PolicyConfig(d_model=32, n_layers=2, context=24), 0)
    opt = build_optimizer(model, TrainConfig())
    supervised_step(model, opt, [encode_prompt("ab")], [encode_answer("ba")])
    return model, opt


@pytest.mark.parametrize("as_uri", [False, True])
def test_round_trip(tmp_path, as_uri):
    model, opt = _trained()
    uri = (tmp_path / "ckpt" / "iteration=0").as_uri() if as_uri else str(tmp_path / "ckpt" / "iteration=0")
    assert not checkpoint_exists(uri)
    save_checkpoint(uri, model, opt, {"policy_version": 4})
    assert checkpoint_exists(uri)
    ck = load_checkpoint(uri)
    assert ck.config == model.cfg and ck.meta == {"policy_version": 4}
    for (name, a), b in zip(model.state_dict().items(), ck.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert ck.model.head.weight is ck.model.tok_emb.weight  # tying survives the load
    reloaded = build_optimizer(ck.model, TrainConfig())
    reloaded.load_state_dict(ck.optimizer_state)
    for sa, sb in zip(opt.state.values(), reloaded.state.values()):
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k


def test_without_optimizer_and_missing(tmp_path):
    model, _ = _trained()
    save_checkpoint(str(tmp_path), model, None, {})
    assert load_checkpoint(str(tmp_path)).optimizer_state is None
    with pytest.raises(FileNotFoundError):
        load_checkpoint(str(tmp_path / "nowhere"))
