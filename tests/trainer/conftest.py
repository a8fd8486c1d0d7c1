"""One torch thread and autograd on for every test here (tests/torch_state.py)."""

from tests.torch_state import trainer_torch_state  # noqa: F401  (an autouse fixture)
