"""Where a process runs its policy: the device choice that rollout, serving and training share.

Under a data-parallel launch (torchrun, trainer/distributed.py) each process takes the CUDA
device of its local rank; read here from the process group and LOCAL_RANK directly, so choosing
a device needs nothing of the trainer.
"""
import os

import torch


def pick_device() -> torch.device:
    """CUDA when present, else CPU with FLYWHEEL_TORCH_THREADS intra-op threads (default 1).

    Why 1: on the 2-core dev machine a second thread makes train_on_rows at most ~1.6x faster
    when the machine is idle (1.1 s vs 1.9 s for 2048 rows), but whenever anything else runs
    (Beam workers, sandboxes, tests) the OpenMP threads wait on each other and it gets 5-10x
    slower (10-25 s). Set FLYWHEEL_TORCH_THREADS on a dedicated many-core trainer.
    """
    if torch.cuda.is_available():  # under a data-parallel launch, this process's own device
        return (torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
                if _data_parallel() else torch.device("cuda"))
    torch.set_num_threads(int(os.environ.get("FLYWHEEL_TORCH_THREADS", "1")))
    return torch.device("cpu")


def _data_parallel() -> bool:
    """Whether this process is one rank of a joined process group of more than one."""
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
