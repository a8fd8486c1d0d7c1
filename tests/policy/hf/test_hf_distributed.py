"""The trainer across processes with a Hugging Face model and a LoRA adapter: two torchrun ranks
over gloo (data-parallel, and FSDP2-sharded) write the checkpoint one process writes on the same
rows, only the adapter moved. tests/trainer/test_distributed.py does the same for the tiny policy.
"""
import pytest
import torch

from flywheel.trainer.algorithm import Algorithm
from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.policy.backends import create_policy
from flywheel.trainer.train_step import TrainConfig
from tests.trainer.test_distributed import _assert_same_stats, _run_both, _uneven
from tests.trainer.test_stale_policy import _rows, _write

pytestmark = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="this torch build has no torch.distributed with gloo")


@pytest.mark.slow  # two torchrun launches of a Hugging Face model (about 15 s each)
@pytest.mark.parametrize("sharding", ["ddp", "fsdp"])
def test_a_lora_update_under_torchrun_writes_the_single_process_checkpoint(
        tiny_model_dir, tmp_path, sharding):
    start = create_policy("hf", {"model": str(tiny_model_dir), "lora_r": 4}, seed=0)
    start.module.eval()
    digest = save_checkpoint(str(tmp_path / "ck0"), start, None, {"policy_version": 0})
    folder = tmp_path / "trajectories" / "iteration=1"
    _write(folder / "domain=a", _uneven(_rows(start, digest, n=11)))
    single, dp = _run_both(tmp_path, str(folder), str(tmp_path / "ck0"),
                           TrainConfig(minibatch_size=5, micro_tokens=40, lr=1e-2),
                           Algorithm(loss="grpo"), sharding=sharding)
    _assert_same_stats(dp["stats"], single["stats"])
    assert single["stats"]["n_steps"] == 6  # 3 minibatches, 2 epochs

    before = start.module.state_dict()
    after = load_checkpoint(str(tmp_path / "out-dp")).policy.module.state_dict()
    moved = {n for n, w in after.items() if not torch.equal(w, before[n])}
    assert moved and all("lora_" in n for n in moved)  # the adapter trained, the base did not
