"""The one update loop (trainer/update_loop.py) that RL, SFT, DPO and the warm start train through:
SFT and DPO under two torchrun ranks (gloo, real processes) reach the single process's weights
and report its figures, data-parallel ("ddp") and sharded ("fsdp"); and every stage clips its
gradient by the same rule.

The torchrun launch runs this file as a script (`__main__` below is the per-rank worker).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from flywheel.policy.checkpoint import policy_digest
from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.preference import DPOConfig, pair, train_preference
from flywheel.trainer.supervised import SFTConfig, example, supervised_step, train_supervised
from flywheel.trainer.train_step import TrainConfig, train_on_rows

try:
    from tests.trainer.test_stale_policy import _policy, _rows
except ImportError:  # run as a script by torchrun (PYTHONPATH holds the repository)
    from test_stale_policy import _policy, _rows

REPO = Path(__file__).resolve().parents[2]
LR = 1e-3
# 9 examples / 7 pairs of uneven lengths: minibatches cut by tokens hold odd counts, so the
# ranks' shares differ in size (one may be empty) and microbatches split them further
CASES = {
    "sft": SFTConfig(lr=LR, epochs=2, batch_tokens=60, micro_tokens=25),
    "sft fsdp": SFTConfig(lr=LR, epochs=1, batch_tokens=60, micro_tokens=25),
    "dpo": DPOConfig(lr=LR, epochs=2, batch_tokens=80, micro_tokens=30),
}
FIGURES = {"sft": ["loss", "tokens", "examples", "steps", "grad_norm"],
           "dpo": ["loss", "reward_margin", "accuracy", "chosen_reward", "rejected_reward",
                   "pairs", "steps", "grad_norm"]}


def _examples(policy) -> list[dict]:
    return [example(policy.encode_prompt(f"q{i}"), policy.encode_response("a" * (1 + i % 5)))
            for i in range(9)]


def _pairs(policy) -> list[dict]:
    return [pair(policy.encode_prompt(f"q{i}"), policy.encode_response("yes" * (1 + i % 2)),
                 policy.encode_response("no" * (1 + i % 3))) for i in range(7)]


def _train(case: str, shard: bool = False) -> tuple[dict, list[dict]]:
    """(weights, history) of the case's stage on the tiny policy from seed 0; `shard`: FSDP2
    over the process group's ranks, the weights gathered whole."""
    from flywheel.trainer import distributed
    from flywheel.trainer.optimizer import build_optimizer
    policy, cfg = _policy(0), CASES[case]
    if shard:
        distributed.shard_module(policy.module, policy.fsdp_forward_methods)
    optimizer = build_optimizer(policy, **cfg.adamw())
    if case.startswith("sft"):
        history = train_supervised(policy, optimizer, _examples(policy), cfg, seed=3)
    else:
        history = train_preference(policy, optimizer, _pairs(policy), cfg, seed=3)
    weights = (distributed.full_state(policy.module, optimizer)[0] if shard
               else policy.module.state_dict())
    return weights, history


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


@pytest.mark.slow  # a torchrun launch; the quick tier keeps RL's (tests/trainer/test_distributed.py)
@pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                    reason="this torch build has no torch.distributed with gloo")
def test_sft_and_dpo_under_two_ranks_take_the_single_process_steps(tmp_path):
    """Two ranks each train on their share of every minibatch, the gradients summed before
    clipping: both ranks hold the same weights, within fp32 rounding of one process's, and
    report its figures (sharded too: FSDP2 over gloo)."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'tests' / 'trainer'}",
           "OMP_NUM_THREADS": "1", "FLYWHEEL_TORCH_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc-per-node=2", __file__, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    got = torch.load(tmp_path / "out.pt")
    for case in CASES:
        weights, history = _train(case)
        assert len(set(got[case]["digests"])) == 1, f"{case}: the ranks' weights differ"
        diff = _max_diff(got[case]["weights"], weights)
        assert diff <= 1e-5, f"{case}: max |weight difference| {diff:.3g}"
        assert _max_diff(weights, _policy(0).module.state_dict()) > 1e-4  # it trained
        assert len(got[case]["history"]) == len(history) == CASES[case].epochs
        for dp, single in zip(got[case]["history"], history):
            for k in FIGURES[case.split()[0]]:
                assert dp[k] == pytest.approx(single[k], rel=1e-4, abs=1e-6), (case, k)


def _delta(before: dict, policy) -> float:
    """The norm of the parameters' move (each parameter once: a tied one is one tensor)."""
    after = dict(policy.module.named_parameters())
    return sum(((after[k] - before[k]).double() ** 2).sum().item() for k in after) ** 0.5


@pytest.mark.parametrize("stage", ["rl", "sft", "dpo", "warm start"])
def test_every_stage_clips_its_gradient_by_the_same_rule(stage):
    """One step under plain SGD at lr 1 moves the weights by the clipped gradient itself: for
    every stage its norm is the bound (0.01), where the gradient was larger (grad_norm)."""
    policy, bound = _policy(0), 0.01
    before = {k: v.detach().clone() for k, v in policy.module.named_parameters()}
    sgd = torch.optim.SGD(policy.module.parameters(), lr=1.0)
    if stage == "rl":
        cfg = TrainConfig(epochs=1, minibatch_size=64, max_grad_norm=bound)
        norm = train_on_rows(policy, sgd, _rows(policy, None, n=6), cfg, seed=0,
                             algorithm=Algorithm(loss="dapo"))["grad_norm"]
    elif stage == "sft":
        cfg = SFTConfig(epochs=1, batch_tokens=10_000, max_grad_norm=bound)
        norm = train_supervised(policy, sgd, _examples(policy), cfg, seed=0)[0]["grad_norm"]
    elif stage == "dpo":
        cfg = DPOConfig(epochs=1, batch_tokens=10_000, max_grad_norm=bound)
        norm = train_preference(policy, sgd, _pairs(policy), cfg, seed=0)[0]["grad_norm"]
    else:
        ex = _examples(policy)
        supervised_step(policy, sgd, [e["prompt_token_ids"] for e in ex],
                        [e["response_token_ids"] for e in ex], max_grad_norm=bound)
        norm = None
    assert _delta(before, policy) == pytest.approx(bound, rel=1e-2)
    assert norm is None or norm > 10 * bound


def test_the_warm_start_step_measures_but_does_not_bound_by_default():
    """supervised_step (the warm start's) keeps its unclipped step: the tables of a run stay
    what they were; the same step bounded moves the weights less."""
    moved = []
    for bound in ({}, {"max_grad_norm": 0.01}):
        policy = _policy(0)
        before = {k: v.detach().clone() for k, v in policy.module.named_parameters()}
        ex = _examples(policy)
        supervised_step(policy, torch.optim.SGD(policy.module.parameters(), lr=1.0),
                        [e["prompt_token_ids"] for e in ex], [e["response_token_ids"] for e in ex],
                        **bound)
        moved.append(_delta(before, policy))
    assert moved[0] > 10 * moved[1]


def _worker(workdir: Path) -> None:
    """One rank of test_sft_and_dpo_under_two_ranks_take_the_single_process_steps."""
    from flywheel.trainer import distributed
    rank, world = distributed.start()
    assert world == 2
    torch.set_num_threads(1)
    out = {}
    for case in CASES:
        weights, history = _train(case, shard=case.endswith("fsdp"))
        digest = policy_digest(_Weights(weights)) if weights else None
        digests = [None] * world
        dist.all_gather_object(digests, digest if not case.endswith("fsdp") else "gathered")
        out[case] = {"weights": weights, "history": history, "digests": digests}
    if rank == 0:
        torch.save(out, workdir / "out.pt")
    distributed.finish()


class _Weights:
    """A state dict as policy_digest reads a policy."""

    def __init__(self, state: dict):
        self.module = self
        self._state = state

    def state_dict(self) -> dict:
        return self._state


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
