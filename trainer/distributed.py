"""The trainer across processes: the process group a torchrun launch describes, and the few
collectives its data-parallel update needs (trainer/train_step.py, trainer/train.py).

    # CPU, 2 processes over gloo (what tests/trainer/test_distributed.py runs):
    python -m torch.distributed.run --standalone --nproc-per-node=2 \
        -m flywheel.trainer.train_job SPEC.json
    # one machine with 8 GPUs: one process per device (LOCAL_RANK = its CUDA device), NCCL:
    torchrun --standalone --nproc-per-node=8 -m flywheel.trainer.train_job SPEC.json
    # 2 machines x 8 GPUs: the same command on each, with
    #   --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=HOST0:29500 --rdzv-id=RUN
    # in place of --standalone (loop/overlap.py launches the standalone form, with
    # `--serve` for SPEC.json: the ranks stay up and serve update after update, train_job.serve)

Every rank reads the whole iteration's index, draws the same permutation from the seed, and
trains on its share of each minibatch (rows r, r + W, r + 2W, ...; a share may be empty); the
minibatch's unit counts (tokens or sequences) are summed over ranks first, so each rank's loss
carries its share of the whole minibatch's weight and the SUM of the ranks' gradients is the
single-process minibatch gradient. Every rank then clips that same gradient and takes the same
optimizer step: the weights stay identical on every rank, and rank 0 writes the checkpoint.

Why gradients are summed by hand after the minibatch's backward passes, not by
DistributedDataParallel: DDP averages (a divide by W to undo with a loss scaled by W, exact only
for W a power of two), all-reduces in its backward hooks, so every rank must run the same number
of backward passes (microbatches vary with the rows, and a rank can have none), and it must own
the module's forward, which the Policy protocol keeps behind `token_logprobs`. One flat SUM per
step after accumulation is exact, needs no wrapper and has no hook to hang on. What it gives up,
overlapping the all-reduce with the backward, matters for large models on many GPUs.

`sharding="fsdp"` (train_iteration, the train_job spec) shards parameters, gradients and Adam's
moments over the ranks instead (FSDP2 `fully_shard`, which runs on CPU over gloo too): every
forward and backward is then a collective, so a rank with fewer microbatches runs idle passes,
and rank 0 gathers the whole state to write the same checkpoint a single process would.

Nothing here does anything unless the process was launched with WORLD_SIZE > 1: `world()` is
then (0, 1) and every helper is a no-op, so a single process computes exactly what it did before.
"""
from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Iterable, Sequence
from datetime import timedelta

import torch
import torch.distributed as dist


def launched() -> bool:
    """Whether this process is one of several that torchrun (or Flywheel) started together."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def start() -> tuple[int, int]:
    """Join the process group of a distributed launch (once; from RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR/PORT as torchrun sets them) and return `world()`. NCCL with one CUDA device per
    local rank where CUDA is present, gloo on CPU; outside a launch, nothing: (0, 1)."""
    if not launched() or (dist.is_available() and dist.is_initialized()):
        return world()
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank())
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device, timeout=timeout())
    else:
        dist.init_process_group("gloo", timeout=timeout())
    return world()


def timeout() -> timedelta:
    """How long a collective waits for the other ranks before it fails:
    FLYWHEEL_TRAINER_PG_TIMEOUT_S seconds, else 30 minutes (gloo's default; now NCCL's too).
    It stays short enough to end a real hang (a rank stuck mid-update) rather than being raised
    to hours for a long-lived launch, whose ranks wait for the next update between rollouts:
    there rank 0 broadcasts a keep-alive every quarter of it (train_job.serve), so that wait
    never reaches it."""
    return timedelta(seconds=float(os.environ.get("FLYWHEEL_TRAINER_PG_TIMEOUT_S", 1800)))


def broadcast_object(obj):
    """Rank 0's `obj` (any picklable value) on every rank; `obj` itself outside a group."""
    if world()[1] == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def die_with_launcher() -> None:
    """SIGKILL this process when its launcher dies (Linux prctl PR_SET_PDEATHSIG): a rank, at
    its start, and the trainer the driver starts (loop/overlap.py, as its preexec_fn), so a
    killed driver leaves no update writing a checkpoint. torchrun starts its ranks in sessions
    of their own and a SIGKILLed torchrun cannot stop them: each rank arms its own. A launcher already gone by the time the
    signal is armed (this process re-parented) ends the rank at once."""
    parent = os.getppid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except OSError:  # no libc.so.6: not Linux, nothing to arm
        return
    if parent == 1 or os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def world() -> tuple[int, int]:
    """(rank, world size) of the joined process group; (0, 1) when there is none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def local_rank() -> int:
    """This process's index on its machine: its CUDA device under a GPU launch."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def finish(together: bool = True) -> None:
    """Leave the process group (the end of a distributed job); a no-op without one.

    `together` (a normal end) waits at a barrier first, so no rank tears its gloo pairs down
    while another still has a collective or its last write in flight (seen in CI: a rank that
    reached destroy_process_group first aborted with "terminate called without an active
    exception"). A rank leaving on an error passes False: its peers may be gone, and a barrier
    would wait for them until the group's timeout."""
    if dist.is_available() and dist.is_initialized():
        if together and world()[1] > 1:
            dist.barrier()
        dist.destroy_process_group()


def barrier() -> None:
    """Wait for every rank (rank 0 writing the checkpoint, the others waiting for it)."""
    if world()[1] > 1:
        dist.barrier()


def _device() -> torch.device:
    """Where collective buffers live: the process's CUDA device under NCCL, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce(values: Sequence[float], op: str = "sum") -> list[float]:
    """`values` (the same length on every rank) summed ("sum") or maxed ("max") over ranks, in
    float64 (counts stay exact); as they are outside a process group."""
    if world()[1] == 1 or not values:
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return t.tolist()


def sum_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Replace each parameter's gradient by the SUM of it over ranks (one flat all-reduce per
    dtype). A parameter keeps grad None only where every rank left it None, as a single process
    that saw all the rows would (AdamW skips it; a zero gradient would still move it). A rank
    without rows calls this too and contributes zeros."""
    if world()[1] == 1:
        return
    params = [p for p in parameters if p.requires_grad]
    some = torch.tensor([float(p.grad is not None) for p in params], device=_device())
    dist.all_reduce(some)
    groups: dict[tuple, list[torch.nn.Parameter]] = {}
    for p, has in zip(params, some.tolist()):
        if has:
            groups.setdefault((p.dtype, p.device), []).append(p)
        else:
            p.grad = None
    for group in groups.values():
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in group]).to(_device())
        dist.all_reduce(flat)
        offset = 0
        for p in group:
            p.grad = flat[offset : offset + p.numel()].view_as(p).to(p.device)
            offset += p.numel()


# --- FSDP (`sharding="fsdp"`): parameters, gradients and optimizer state sharded over ranks ---

SHARDINGS = ("ddp", "fsdp")


def shard_module(module: torch.nn.Module, forward_methods: tuple[str, ...] = ()) -> None:
    """FSDP2 (`fully_shard`) over `module`: each block of its ModuleLists a unit of its own (one
    all-gather per block in forward, so only one block is ever whole), then the rest. The
    gradient reduction SUMs, as sum_gradients does: divide factor 1, and plain SUM collectives
    (the default for a factor is NCCL's PREMUL_SUM, which gloo refuses).

    `forward_methods` (the policy's fsdp_forward_methods) are methods of the root that run
    its submodules without its forward (an hf model's body, then its head): registered, they
    gather and free the root's own weights (embeddings, head, final norm) as its forward does."""
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
    units = [b for m in module.modules() if isinstance(m, torch.nn.ModuleList) for b in m]
    for unit in [*units, module]:  # the root last: it takes the parameters left over
        fully_shard(unit)
        unit.set_gradient_divide_factor(1.0)
        unit.set_force_sum_reduction_for_comms(True)
    for name in forward_methods:
        register_fsdp_forward_method(module, name)


def is_sharded(module: torch.nn.Module) -> bool:
    """Whether `module` is FSDP-sharded: every forward and backward is then a collective."""
    from torch.distributed.fsdp import FSDPModule
    return isinstance(module, FSDPModule)


def load_optimizer_state(module: torch.nn.Module, optimizer: torch.optim.Optimizer,
                         state: dict) -> None:
    """Load a checkpoint's (unsharded, numbered) optimizer state into the optimizer of a sharded
    `module`: each rank keeps its shard."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict
    names = [n for n, _ in module.named_parameters()]
    by_name = {"state": {names[i]: s for i, s in state["state"].items()},
               "param_groups": [{**g, "params": [names[i] for i in g["params"]]}
                                for g in state["param_groups"]]}
    set_optimizer_state_dict(module, optimizer, by_name,
                             options=StateDictOptions(full_state_dict=True))


def full_state(module: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """(weights, optimizer state) of a sharded `module`, whole, on the CPU, the optimizer's
    numbered as a single process's optimizer.state_dict() is (what checkpoints hold). A
    collective: every rank calls it; rank 0 gets them, the others empty dicts."""
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights = get_model_state_dict(module, options=options)
    by_name = get_optimizer_state_dict(module, optimizer, options=options)
    if not by_name:  # not rank 0
        return weights, {}
    number = {n: i for i, (n, _) in enumerate(module.named_parameters())}
    state = {"state": {number[n]: s for n, s in by_name["state"].items()},
             "param_groups": [{**g, "params": [number[n] for n in g["params"]]}
                              for g in by_name["param_groups"]]}
    return weights, state
