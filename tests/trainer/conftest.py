import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Run as the trainer does on CPU (pick_device: 1 thread), and leave other suites' setting alone."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
