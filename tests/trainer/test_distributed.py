"""The trainer across processes (trainer/distributed.py): two real processes over gloo, launched by
torchrun, train to the weights one process reaches on the same rows, within fp32 tolerance.

The launches run this file as a script (`__main__` below is the per-rank worker of the step
tests) and train_job as loop/overlap.py runs it, data-parallel ("ddp") and sharded
("fsdp", FSDP2 over gloo).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

from flywheel.trainer.algorithm import Algorithm
from flywheel.policy.checkpoint import load_checkpoint, policy_digest, save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.trainer.train_job import run as run_job
from flywheel.trainer.train_job import spec_of
from flywheel.trainer.supervised import supervised_step
from flywheel.trainer.train_step import TrainConfig, train_on_rows

try:
    from tests.trainer.test_stale_policy import _policy, _rows, _write
except ImportError:  # run as a script by torchrun (PYTHONPATH holds the repository)
    from test_stale_policy import _policy, _rows, _write

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()),
    reason="this torch build has no torch.distributed with gloo")

REPO = Path(__file__).resolve().parents[2]
# 11 rows: ranks get 6 and 5 of a whole minibatch; minibatch_size 5 leaves a last minibatch of
# one row, so rank 1 has none there and must still join every collective
CASES = {
    "dapo 1 step": (Algorithm(loss="dapo"), TrainConfig(minibatch_size=11, epochs=1)),
    "grpo 1 step": (Algorithm(loss="grpo"), TrainConfig(minibatch_size=11, epochs=1)),
    "dapo 6 steps": (Algorithm(loss="dapo"), TrainConfig(minibatch_size=5, epochs=2)),
    "grpo 6 steps, microbatched": (Algorithm(loss="grpo"),
                                   TrainConfig(minibatch_size=5, epochs=2, micro_tokens=40)),
}
STATS = ["loss", "pg_loss", "clip_frac", "approx_kl", "grad_norm", "entropy",
         "logprob_diff_mean", "logprob_diff_max", "n_sequences", "n_tokens", "n_steps"]
# Max |weight difference| allowed (lr 5e-4 moves a weight ~5e-4 a step). The summed gradient
# equals the single process's to ~5e-7 of its scale (fp32 summation order); what reaches the
# weights is larger only where a gradient is within a few times AdamW's eps (1e-8), whose
# g / (|g| + eps) turns 1e-9 of rounding into a visible share of a step. Measured here: 4e-8 to
# 1e-7 after 1 to 6 steps (train_job 1e-7, off-policy 2e-8, fsdp 7e-9); rows of equal lengths
# 6e-6 after 6 steps (the single process against itself cut into microbatches: 1.5e-6).
ATOL = {1: 1e-6, 6: 1e-5}


def _uneven(rows: list[dict]) -> list[dict]:
    """The rows with responses cut to 1..6 tokens, so token-mean and sequence-mean differ."""
    return [dict(r, response_token_ids=r["response_token_ids"][: 1 + i % 6],
                 response_logprobs=r["response_logprobs"][: 1 + i % 6])
            for i, r in enumerate(rows)]


def _gradient(loss: str, rows: list[dict], share: bool = False) -> dict:
    """The gradient of one minibatch of `rows` at the tiny policy from seed 0: of all of them,
    or (`share`, inside a process group) of this rank's share, summed over ranks."""
    from flywheel.trainer.train_step import RLObjective
    from flywheel.trainer.update_loop import accumulate
    policy, algorithm, cfg = _policy(0), Algorithm(loss=loss), TrainConfig()
    policy.module.train()
    overrides = {**cfg.loss_overrides(rows), "aggregation": algorithm.loss_aggregation()}
    objective = RLObjective(policy, cfg, algorithm, overrides, None, "cpu", ["pg_loss", "entropy"])
    if share:
        rank, world = dist.get_rank(), dist.get_world_size()
        accumulate(policy, rows[rank::world], objective)
    else:
        accumulate(policy, rows, objective)
    return {n: p.grad for n, p in policy.module.named_parameters()}


def _train(case: str, rows: list[dict]) -> tuple[dict, dict, str]:
    """(weights, stats, digest) after the case's update of the tiny policy from seed 0."""
    algorithm, cfg = CASES[case]
    policy = _policy(0)
    optimizer = build_optimizer(policy, **cfg.adamw())
    stats = train_on_rows(policy, optimizer, rows, cfg, seed=7, algorithm=algorithm)
    return policy.module.state_dict(), stats, policy_digest(policy)


def _torchrun(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'tests' / 'trainer'}",
           "OMP_NUM_THREADS": "1", "FLYWHEEL_TORCH_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc-per-node=2", *args], env=env, capture_output=True,
                         text=True, timeout=timeout, cwd=REPO)
    errors = [line for line in out.stderr.splitlines() if "Error" in line or "error:" in line]
    assert out.returncode == 0, "\n".join(errors[-20:]) + out.stderr[-3000:]
    return out


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


def _assert_same_stats(dp: dict, single: dict, names=STATS):
    for k in names:
        assert dp[k] == pytest.approx(single[k], rel=1e-4, abs=1e-6), k


def test_each_rank_streams_its_share_of_every_minibatch(tmp_path):
    """StreamedRows(rank, world): rows rank, rank + world, ... of each minibatch (none, for a
    rank past a short last minibatch), over one window or many; together, the minibatch."""
    from flywheel.schemas.read import table_dataset
    from flywheel.trainer.trajectory_stream import StreamedRows
    folder = tmp_path / "trajectories" / "iteration=0"
    _write(folder / "domain=a", _uneven(_rows(_policy(0), None, n=11)))
    order = np.random.default_rng(0).permutation(11)
    for window in (4, 10_000):  # three windows read apart; one, kept
        rows = StreamedRows(table_dataset(str(folder), "trajectories"), window_rows=window)
        whole = list(rows.minibatches(order, 5))
        shares = [list(rows.minibatches(order, 5, rank, 2)) for rank in (0, 1)]
        assert [len(m) for m in shares[1]] == [2, 2, 0]
        for minibatch, first, second in zip(whole, *shares):
            assert first == minibatch[0::2] and second == minibatch[1::2]


def test_two_processes_take_the_single_process_steps(tmp_path):
    """Token-mean (dapo) and sequence-mean (grpo) losses, 11 rows, 1 and 6 steps: the weights on
    both ranks are the same (digest) and within fp32 rounding of the single process's, and
    rank 0 reports the single process's stats; refused rows are refused by both ranks alike."""
    rows = _uneven(_rows(_policy(0), None, n=11))
    torch.save({"rows": rows}, tmp_path / "inputs.pt")
    _torchrun(__file__, str(tmp_path))
    out = torch.load(tmp_path / "out.pt")
    for case in CASES:
        weights, stats, _ = _train(case, rows)
        got = out[case]
        assert len(set(got["digests"])) == 1, f"{case}: the ranks' weights differ"
        diff = _max_diff(got["weights"], weights)
        assert diff <= ATOL[stats["n_steps"]], f"{case}: max |weight difference| {diff:.3g}"
        start = _policy(0).module.state_dict()
        assert _max_diff(weights, start) > 1e-4  # the update moved the weights
        _assert_same_stats(got["stats"], stats)
    assert out["refused"] == ["StalePolicyError", "StalePolicyError"]
    for loss in ("dapo", "grpo"):  # the summed gradient itself, before clipping and AdamW
        single = _gradient(loss, rows)
        for name, g in out["gradients"][loss].items():
            torch.testing.assert_close(g, single[name], rtol=1e-5, atol=1e-8)


@pytest.mark.slow  # 6 s: a second torchrun launch; the quick tier keeps the two-rank step test
def test_train_job_under_torchrun_writes_the_single_process_checkpoint(tmp_path):
    start = _policy(0)
    digest = save_checkpoint(str(tmp_path / "ck0"), start, None, {"policy_version": 0})
    folder = tmp_path / "trajectories" / "iteration=1"
    _write(folder / "domain=a", _uneven(_rows(start, digest, n=7)))
    _write(folder / "domain=b", _rows(start, digest, n=4))
    cfg = TrainConfig(minibatch_size=4, epochs=2)
    single, dp = _run_both(tmp_path, str(folder), str(tmp_path / "ck0"), cfg,
                           Algorithm(loss="dapo"))
    _assert_same_stats(dp["stats"], single["stats"])


@pytest.mark.slow  # a torchrun launch of 2 ranks (7 s); the quick tier keeps the ddp ones
def test_the_off_policy_update_under_torchrun_matches_too(tmp_path):
    v1, v2 = _policy(1), _policy(2)
    uris = {k: str(tmp_path / f"ck{k}") for k in (1, 2)}
    d1 = save_checkpoint(uris[1], v1, None, {"policy_version": 1})
    d2 = save_checkpoint(uris[2], v2, None, {"policy_version": 2})
    folder = tmp_path / "trajectories" / "iteration=3"
    _write(folder / "domain=a", _uneven(_rows(v1, d1, n=7)))  # one version behind: corrected
    _write(folder / "domain=b", _rows(v2, d2, n=4))
    single, dp = _run_both(tmp_path, str(folder), uris[2], TrainConfig(minibatch_size=6),
                           Algorithm(loss="grpo"), older=[uris[1]])
    assert single["stats"]["stale_rows"] == 7 and single["stats"]["is_weight_max"] > 0
    _assert_same_stats(dp["stats"], single["stats"], STATS + [
        "is_weight_mean", "is_weight_max", "is_clip_frac", "stale_rows", "staleness_mean"])


@pytest.mark.slow  # a torchrun launch of 2 ranks (7 s); the quick tier keeps the ddp ones
def test_fsdp_under_torchrun_writes_the_single_process_checkpoint(tmp_path):
    """sharding="fsdp": parameters, gradients and Adam's moments sharded over the two ranks
    (FSDP2 over gloo), starting from a checkpoint that holds optimizer state; the checkpoint
    rank 0 gathers and writes is the single process's."""
    start = _policy(0)
    start.module.train()
    optimizer = build_optimizer(start, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.0)
    supervised_step(start, optimizer, [start.encode_prompt("1+1=")], [start.encode_response("2")])
    digest = save_checkpoint(str(tmp_path / "ck0"), start, optimizer, {"policy_version": 0})
    folder = tmp_path / "trajectories" / "iteration=1"
    _write(folder / "domain=a", _uneven(_rows(start, digest, n=11)))
    single, dp = _run_both(tmp_path, str(folder), str(tmp_path / "ck0"),
                           TrainConfig(minibatch_size=5, micro_tokens=40),
                           Algorithm(loss="grpo"), sharding="fsdp")
    _assert_same_stats(dp["stats"], single["stats"])


def _run_both(tmp_path, trajectories, init, cfg, algorithm, older=(), sharding="ddp"):
    """train_job in this process and under a 2-process torchrun on the same spec; checks the
    checkpoints agree and returns both result files."""
    results = {}
    for name in ("single", "dp"):
        spec = spec_of(trajectories, init, str(tmp_path / f"out-{name}"), cfg, seed=5,
                       result=str(tmp_path / f"result-{name}.json"), algorithm=algorithm,
                       older_checkpoint_uris=older, sharding=sharding)
        if name == "single":
            results[name] = run_job(spec)
        else:
            (tmp_path / "spec.json").write_text(json.dumps(spec))
            _torchrun("-m", "flywheel.trainer.train_job", str(tmp_path / "spec.json"))
            results[name] = json.loads((tmp_path / "result-dp.json").read_text())
    a, b = (load_checkpoint(str(tmp_path / f"out-{n}")) for n in ("single", "dp"))
    diff = _max_diff(a.policy.module.state_dict(), b.policy.module.state_dict())
    assert diff <= ATOL[6], f"max |weight difference| {diff:.3g}"
    assert a.meta["policy_version"] == b.meta["policy_version"]
    moments = [(s["exp_avg"], t["exp_avg"]) for s, t in zip(a.optimizer_state["state"].values(),
                                                            b.optimizer_state["state"].values())]
    assert all(torch.allclose(s, t, rtol=1e-4, atol=1e-7) for s, t in moments)
    return results["single"], results["dp"]


def _worker(workdir: Path) -> None:
    """One rank of test_two_processes_take_the_single_process_steps."""
    from flywheel.trainer import distributed
    rank, world = distributed.start()
    assert world == 2
    torch.set_num_threads(1)
    rows = torch.load(workdir / "inputs.pt")["rows"]
    out = {}
    for case in CASES:
        weights, stats, digest = _train(case, rows)
        digests = [None] * world
        dist.all_gather_object(digests, digest)  # the same weights on every rank
        out[case] = {"weights": weights, "stats": stats, "digests": digests}
    out["gradients"] = {loss: _gradient(loss, rows, share=True) for loss in ("dapo", "grpo")}
    # rows of another policy: every rank refuses them before any collective, none hangs
    start = _policy(0)
    save_checkpoint(str(workdir / f"ck-{rank}"), start, None, {})
    _write(workdir / f"stale-{rank}" / "domain=a", _rows(_policy(3), "sha256:other", n=3))
    result = run_job(spec_of(str(workdir / f"stale-{rank}"), str(workdir / f"ck-{rank}"),
                             str(workdir / f"never-{rank}"), TrainConfig(), 0, "unused"))
    out["refused"] = [None] * world
    dist.all_gather_object(out["refused"], result.get("error"))
    if rank == 0:
        torch.save(out, workdir / "out.pt")
    distributed.finish()


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
