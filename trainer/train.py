"""One trainer iteration: trajectories/iteration=K + checkpoint K-1 -> checkpoint K.

    from flywheel.trainer.train import train_iteration
    train_iteration("runs/r/tables/trajectories/iteration=3", "runs/r/checkpoints/iteration=2",
                    "runs/r/checkpoints/iteration=3", TrainConfig(), seed=3, algorithm=Algorithm())

Rows sampled from any other weights than the starting checkpoint's are refused (StalePolicyError),
since training on them updates a policy that did not produce them: a weight sync that failed
silently would otherwise go unnoticed for as long as the run lasts. With rollout and training
overlapped, rows of the `older_checkpoint_uris` (the max_staleness versions before the start)
are allowed too, and corrected for (trainer/off_policy.py).

The rows are streamed (trainer/trajectory_stream.py), never all held: an iteration of 100k+
attempts trains in the memory of one window of rows.

Under a torchrun launch (trainer/distributed.py) every rank runs this same function: each checks
the same rows and refuses them alike before any collective, trains on its share of every
minibatch, and rank 0 alone writes the checkpoint while the others wait for it.
"""
import copy
from collections.abc import Sequence

from flywheel.schemas.read import table_dataset
from flywheel.trainer import distributed
from flywheel.trainer.algorithm import Algorithm
from flywheel.policy.checkpoint import load_checkpoint, recorded_digest, save_checkpoint
from flywheel.trainer.off_policy import StalePolicyError, check_staleness
from flywheel.trainer.optimizer import apply_hyperparams, build_optimizer
from flywheel.policy.policy import Policy
from flywheel.policy.device import pick_device
from flywheel.trainer.train_step import TrainConfig, train_on_minibatches
from flywheel.trainer.trajectory_stream import WINDOW_ROWS, StreamedRows

__all__ = ["StalePolicyError", "train_iteration"]


def train_iteration(
    trajectories_uri: str,
    init_checkpoint_uri: str,
    out_checkpoint_uri: str,
    cfg: TrainConfig,
    seed: int,
    reference_checkpoint_uri: str | None = None,
    window_rows: int = WINDOW_ROWS,
    algorithm: Algorithm = Algorithm(),
    older_checkpoint_uris: Sequence[str] = (),
    sharding: str = "ddp",
) -> dict:
    """Train the policy at `init_checkpoint_uri` on one iteration's trajectories with the run's
    `algorithm` (loss, aggregation, credit: the one the rollout assigned advantages with); save
    and return stats.

    `reference_checkpoint_uri` (the run's initial policy, usually) is the frozen reference of the
    KL term; it is loaded only when cfg.kl_coef > 0, and then required. `window_rows` bounds the
    rows held at once (see trajectory_stream.py); it changes the reads, never the result.
    `older_checkpoint_uris`: the checkpoints 1, 2, ... versions before the start whose rows
    may be trained on (an overlapped run's max_staleness of them); the stats then hold
    stale_rows, staleness_mean and staleness_max, and the importance weights' statistics.
    `sharding`, under a data-parallel launch (trainer/distributed.py): "ddp", every rank holds
    the whole model and optimizer, gradients summed; "fsdp", parameters, gradients and
    optimizer state sharded over the ranks (FSDP2). One process ignores it.
    """
    if sharding not in distributed.SHARDINGS:
        raise ValueError(f"unknown sharding {sharding!r}: known ones are "
                         f"{', '.join(distributed.SHARDINGS)}")
    rank, ranks = distributed.start()  # (0, 1) unless launched data-parallel
    device = pick_device()
    dataset = table_dataset(trajectories_uri, "trajectories", missing_ok=False)
    ckpt = load_checkpoint(init_checkpoint_uri, device=device)
    # one pass: the rows with signal (under the run's credit), sizes and digests
    rows = StreamedRows(dataset, window_rows=window_rows, credit=algorithm.credit)
    allowed = {recorded_digest(u): i + 1 for i, u in enumerate(older_checkpoint_uris)}
    allowed[ckpt.digest] = 0
    staleness = check_staleness(rows.digests, allowed, trajectories_uri, init_checkpoint_uri)
    if not older_checkpoint_uris:  # every row is the start's own: no staleness figures
        staleness = {}
    policy = ckpt.policy
    proximal = None
    if staleness.get("stale_rows"):  # a frozen copy of the starting weights: pi_prox
        proximal = copy.deepcopy(policy)
        proximal.module.eval().requires_grad_(False)
    sharded = sharding == "fsdp" and ranks > 1
    if sharded:
        distributed.shard_module(policy.module, policy.fsdp_forward_methods)
    optimizer = build_optimizer(policy, **cfg.adamw())
    if ckpt.optimizer_state is not None:
        if sharded:  # each rank its shard of Adam's moments
            distributed.load_optimizer_state(policy.module, optimizer, ckpt.optimizer_state)
        else:
            optimizer.load_state_dict(ckpt.optimizer_state)  # keeps Adam's moments...
        apply_hyperparams(optimizer, **cfg.adamw())  # ...but this iteration's lr, betas, weight decay
    reference = None
    if cfg.kl_coef > 0:
        reference = _frozen(reference_checkpoint_uri, device)
    stats = train_on_minibatches(policy, optimizer, rows, cfg, seed=seed, device=device,
                                 reference=reference, algorithm=algorithm,
                                 start_digest=ckpt.digest, proximal=proximal)
    stats.update(staleness)
    meta = {
        "policy_version": int(ckpt.meta.get("policy_version", 0)) + 1,
        "train_stats": stats,
        "train_config": cfg.to_dict(),
        "algorithm": algorithm.to_dict(),
    }
    if sharded:  # rank 0 saves the whole weights and optimizer state, gathered
        policy, optimizer = _gathered(policy, optimizer, init_checkpoint_uri, cfg)
    if rank == 0:  # ddp: every rank holds the same weights and optimizer state
        save_checkpoint(out_checkpoint_uri, policy, optimizer, meta)
    distributed.barrier()  # the checkpoint is complete when any rank returns
    return stats


def _gathered(policy: Policy, optimizer, init_checkpoint_uri: str, cfg: TrainConfig):
    """(policy, optimizer) unsharded on rank 0's CPU from an FSDP-sharded pair (a collective);
    (None, None) on the other ranks. The unsharded policy is the starting checkpoint's, reloaded,
    with the trained weights loaded into it."""
    weights, state = distributed.full_state(policy.module, optimizer)
    if distributed.world()[0] != 0:
        return None, None
    whole = load_checkpoint(init_checkpoint_uri, device="cpu").policy
    whole.module.load_state_dict(weights)
    whole_optimizer = build_optimizer(whole, **cfg.adamw())
    whole_optimizer.load_state_dict(state)
    return whole, whole_optimizer


def _frozen(uri: str | None, device) -> Policy:
    """The reference policy at `uri`, in eval mode, without gradients."""
    if not uri:
        raise ValueError("kl_coef > 0 needs a reference checkpoint (reference_checkpoint_uri)")
    reference = load_checkpoint(uri, device=device).policy
    reference.module.eval().requires_grad_(False)
    return reference
