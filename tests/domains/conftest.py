"""The environment API's tests use the families' fixtures (a real sandbox per module, score, play,
task environments): tests/families/conftest.py holds them."""

from tests.families.conftest import *  # noqa: F401,F403
