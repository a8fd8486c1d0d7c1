import pytest
import torch

from flywheel.policy.checkpoint import checkpoint_exists, load_checkpoint, save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.trainer.supervised import supervised_step
from flywheel.trainer.train_step import TrainConfig


def _trained():
    policy = create_policy("tiny", {"d_model": 32, "n_layers": 2, "context": 24}, 0)
    opt = build_optimizer(policy, **TrainConfig().adamw())
    supervised_step(policy, opt, [policy.encode_prompt("ab")], [policy.encode_response("ba")])
    return policy, opt


@pytest.mark.parametrize("as_uri", [False, True])
def test_round_trip(tmp_path, as_uri):
    policy, opt = _trained()
    uri = (tmp_path / "ckpt" / "iteration=0").as_uri() if as_uri else str(tmp_path / "ckpt" / "iteration=0")
    assert not checkpoint_exists(uri)
    save_checkpoint(uri, policy, opt, {"policy_version": 4})
    assert checkpoint_exists(uri)
    ck = load_checkpoint(uri)
    assert ck.policy.config == policy.config and ck.meta == {"policy_version": 4}
    for (name, a), b in zip(policy.module.state_dict().items(), ck.policy.module.state_dict().values()):
        assert torch.equal(a, b), name
    assert ck.policy.module.head.weight is ck.policy.module.tok_emb.weight  # tying survives the load
    reloaded = build_optimizer(ck.policy, **TrainConfig().adamw())
    reloaded.load_state_dict(ck.optimizer_state)
    for sa, sb in zip(opt.state.values(), reloaded.state.values()):
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k


def test_without_optimizer_and_missing(tmp_path):
    policy, _ = _trained()
    save_checkpoint(str(tmp_path), policy, None, {})
    assert load_checkpoint(str(tmp_path)).optimizer_state is None
    with pytest.raises(FileNotFoundError):
        load_checkpoint(str(tmp_path / "nowhere"))


def test_relative_uris_between_checkpoints_on_any_filesystem(tmp_path):
    """How a LoRA checkpoint names the base another checkpoint of its run holds."""
    from flywheel.schemas.storage import relative_uri, resolve
    for root in ("gs://bucket/runs/r", str(tmp_path / "r")):
        base, later = f"{root}/checkpoints/initial/hf", f"{root}/checkpoints/iteration=3"
        assert relative_uri(base, later) == "../initial/hf"
        assert resolve(later, "../initial/hf") == base
        assert resolve(later, "hf") == f"{later}/hf"
    assert relative_uri("gs://a/x/hf", "gs://b/x") is None
    assert relative_uri("gs://a/x/hf", str(tmp_path)) is None
