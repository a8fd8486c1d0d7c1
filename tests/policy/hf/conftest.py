"""A tiny random Llama with a real, locally trained BPE tokenizer and a chat template, built once
per session (about a second), and a model cache of the test's own."""
import pytest

pytest.importorskip("transformers", reason="the hf extra is not installed")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from flywheel.policy.backends.hf.tiny_llama import build_tiny_llama
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), seed=0)


@pytest.fixture(autouse=True)
def model_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLYWHEEL_MODEL_CACHE", str(tmp_path / "model-cache"))
    return tmp_path / "model-cache"


@pytest.fixture
def shared_model_cache(session_model_cache, monkeypatch):
    """The session's model cache instead of the test's own: for tests of a large named model
    (SmolLM2, whose dequantized copy takes ~20 s to make), not of the cache."""
    monkeypatch.setenv("FLYWHEEL_MODEL_CACHE", str(session_model_cache))
    return session_model_cache
