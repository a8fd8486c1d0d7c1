"""A model at a gs:// URI (a real GCS emulator, over HTTP) is copied once into the local model
cache and loaded from there; a rewritten model at the same URI is copied again."""
from pathlib import Path

import pyarrow.fs as pafs
import pytest
import torch

from flywheel.policy.backends import create_policy


@pytest.fixture
def gcs_endpoint(gcs_emulator):
    """HOST:PORT of the session's GCS emulator (tests/conftest.py), whose bucket is `runs`."""
    return gcs_emulator.removeprefix("http://")


def _upload(directory: str, uri: str) -> None:
    fs, root = pafs.FileSystem.from_uri(uri)
    for f in Path(directory).iterdir():
        with fs.open_output_stream(f"{root}/{f.name}") as out:
            out.write(f.read_bytes())


def test_a_gs_model_is_copied_once_and_again_when_rewritten(tiny_model_dir, gcs_endpoint,
                                                            model_cache):
    uri = f"gs://anonymous@runs/models/tiny?endpoint_override={gcs_endpoint}&scheme=http"
    _upload(tiny_model_dir, uri)
    local = create_policy("hf", {"model": str(tiny_model_dir)}, seed=0)
    remote = create_policy("hf", {"model": uri}, seed=0)
    copies = [p for p in model_cache.iterdir() if (p / ".complete").exists()]
    assert len(copies) == 1 and (copies[0] / "model.safetensors").exists()
    for a, b in zip(local.module.state_dict().values(), remote.module.state_dict().values()):
        assert torch.equal(a, b)
    assert remote.encode_prompt("hi") == local.encode_prompt("hi")

    create_policy("hf", {"model": uri}, seed=0)  # the same files: the cached copy serves
    assert len([p for p in model_cache.iterdir() if (p / ".complete").exists()]) == 1

    fs, root = pafs.FileSystem.from_uri(uri)
    with fs.open_output_stream(f"{root}/extra.txt") as out:  # the model at the URI changed
        out.write(b"new file")
    create_policy("hf", {"model": uri}, seed=0)
    assert len([p for p in model_cache.iterdir() if (p / ".complete").exists()]) == 2
