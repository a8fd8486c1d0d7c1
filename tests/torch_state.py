"""The torch state the trainer's and the policy's tests start from (their conftests import it)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def trainer_torch_state():
    """One torch thread (as pick_device sets on CPU) and autograd on, whatever other suites left
    behind; both are restored afterwards."""
    threads, grad = torch.get_num_threads(), torch.is_grad_enabled()
    torch.set_num_threads(1)
    torch.set_grad_enabled(True)
    yield
    torch.set_num_threads(threads)
    torch.set_grad_enabled(grad)
