"""No silent stale policy: checkpoints record the digest of their weights, loading checks it, and
the trainer refuses trajectory rows sampled from any other weights than the ones it starts from."""

import json
import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from flywheel.schemas import file_schema, read_table, rows_to_file_table
from flywheel.policy.checkpoint import (CheckpointDigestError, load_checkpoint, policy_digest,
                                         save_checkpoint)
from flywheel.policy.checkpoint import save_torch
from flywheel.policy.backends import create_policy
from flywheel.trainer.train import StalePolicyError, train_iteration
from flywheel.trainer.train_step import TrainConfig
from flywheel.policy.rollout_engine import engine_for

SMALL = {"d_model": 32, "n_layers": 1, "context": 48}


def _policy(seed):
    policy = create_policy("tiny", SMALL, seed)
    policy.module.eval()
    return policy


def _rows(policy, digest, n=8):
    """Real samples of `policy`, half of them rewarded, recording `digest` as their sampler."""
    prompts = [policy.encode_prompt(f"{i % 4}+1=") for i in range(n)]
    out = engine_for(policy, local=True).sample(prompts, [1.0] * n, list(range(n)), max_new_tokens=6)
    return [dict(task_id=str(i // 2), prompt_token_ids=p, response_token_ids=s.token_ids,
                 response_logprobs=s.logprobs, advantage=1.0 if i % 2 else -1.0,
                 sampling_temperature=1.0, filtered=False, checkpoint_digest=digest)
            for i, (p, s) in enumerate(zip(prompts, out))]


def _write(folder, rows, version=None):
    """One Parquet file as the rollout writes it; `version="1.0"`: as Flywheel wrote it before
    the checkpoint_digest column existed (no such column, 1.0 in metadata and column)."""
    folder.mkdir(parents=True, exist_ok=True)
    table = rows_to_file_table("trajectories", rows)
    if version == "1.0":
        table = table.drop_columns(["checkpoint_digest"])
        meta = {**file_schema("trajectories").metadata, b"flywheel.schema_version": b"1.0"}
        table = table.replace_schema_metadata(meta).set_column(
            0, "schema_version", pa.array(["1.0"] * table.num_rows))
    pq.write_table(table, folder / f"part-{len(list(folder.iterdir())):05d}.parquet")


def test_the_digest_names_the_weights_and_survives_save_and_load(tmp_path):
    policy = _policy(0)
    digest = save_checkpoint(str(tmp_path / "ck"), policy, None, {"policy_version": 0})
    assert digest == policy_digest(policy) == policy_digest(_policy(0))
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert json.loads((tmp_path / "ck" / "config.json").read_text())["digest"] == digest
    assert load_checkpoint(str(tmp_path / "ck")).digest == digest
    assert policy_digest(_policy(1)) != digest
    with torch.no_grad():  # one weight nudged by one ulp is another policy
        w = policy.module.state_dict()["tok_emb.weight"]
        w[0, 0] = torch.nextafter(w[0, 0], torch.tensor(1.0))
    assert policy_digest(policy) != digest


def test_a_checkpoint_whose_weights_changed_after_saving_is_refused(tmp_path):
    uri = str(tmp_path / "ck")
    recorded = save_checkpoint(uri, _policy(0), None, {})
    other = _policy(1)
    save_torch(f"{uri}/model.pt", other.module.state_dict())  # a sync that overwrote the weights
    with pytest.raises(CheckpointDigestError) as e:
        load_checkpoint(uri)
    assert uri in str(e.value) and recorded in str(e.value) and policy_digest(other) in str(e.value)


def test_the_trainer_refuses_rows_sampled_from_another_checkpoint_naming_both(tmp_path):
    start, stale = _policy(0), _policy(1)
    digest = save_checkpoint(str(tmp_path / "ck0"), start, None, {"policy_version": 0})
    stale_digest = policy_digest(stale)
    folder = tmp_path / "trajectories" / "iteration=0"
    _write(folder / "domain=a", _rows(start, digest))
    _write(folder / "domain=b", _rows(stale, stale_digest, n=3))
    with pytest.raises(StalePolicyError) as e:
        train_iteration(str(folder), str(tmp_path / "ck0"), str(tmp_path / "ck1"),
                        TrainConfig(minibatch_size=4), seed=0)
    message = str(e.value)
    assert digest in message and stale_digest in message
    assert "3 of 11 trajectory rows" in message and "3 row(s) from" in message
    assert not (tmp_path / "ck1").exists()  # nothing trained, nothing saved


def test_rows_of_the_starting_checkpoint_train(tmp_path):
    start = _policy(0)
    digest = save_checkpoint(str(tmp_path / "ck0"), start, None, {"policy_version": 0})
    folder = tmp_path / "trajectories" / "iteration=0"
    _write(folder / "domain=a", _rows(start, digest))
    stats = train_iteration(str(folder), str(tmp_path / "ck0"), str(tmp_path / "ck1"),
                            TrainConfig(minibatch_size=4), seed=0)
    assert stats["n_sequences"] == 8 and np.isfinite(stats["loss"])
    trained = load_checkpoint(str(tmp_path / "ck1"))
    assert trained.digest not in (digest, None)  # the next iteration's rollout records this one


def test_an_old_table_without_digests_still_trains_with_a_warning(tmp_path, caplog):
    start = _policy(0)
    save_checkpoint(str(tmp_path / "ck0"), start, None, {"policy_version": 0})
    folder = tmp_path / "trajectories" / "iteration=0"
    _write(folder / "domain=a", _rows(start, None), version="1.0")
    old = read_table(str(folder), "trajectories")
    assert set(old.column("schema_version").to_pylist()) == {"1.0"}
    assert old.column("checkpoint_digest").null_count == old.num_rows == 8
    with caplog.at_level(logging.WARNING, logger="flywheel.trainer.train"):
        stats = train_iteration(str(folder), str(tmp_path / "ck0"), str(tmp_path / "ck1"),
                                TrainConfig(minibatch_size=4), seed=0)
    assert stats["n_sequences"] == 8 and stats["n_steps"] > 0
    assert "8 of 8 trajectory rows record no checkpoint_digest" in caplog.text
    before, after = start.module.state_dict(), load_checkpoint(str(tmp_path / "ck1")).policy.module
    assert any(not torch.equal(before[k], v) for k, v in after.state_dict().items())
