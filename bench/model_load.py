"""A GGUF model's load: read from the GGUF file (what every process did before the dequantized
copy) vs. from its dequantized copy in the model cache, side by side in one run.

    python bench/model_load.py [--model smollm2] [--repeats 3]

Each repeat times, in this process, `_from_gguf` (the GGUF file parsed for the config, the
tokenizer and the weights, then dequantized) and `create_policy` reading the copy (made once,
before the timings, in a fresh temporary model cache), and prints both and their ratio.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2", help="a named model or .gguf path")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    os.environ["FLYWHEEL_MODEL_CACHE"] = tempfile.mkdtemp(prefix="model-load-")
    from flywheel.policy.backends import create_policy
    from flywheel.policy.backends.hf.model_files import model_location
    from flywheel.policy.backends.hf.named_models import NAMED_MODELS
    from flywheel.policy.backends.hf.policy import _from_gguf
    source = NAMED_MODELS.get(args.model)() if args.model in NAMED_MODELS else args.model
    directory, gguf = model_location(source)
    if gguf is None:
        raise SystemExit(f"{source} is not a GGUF file")
    start = time.perf_counter()
    create_policy("hf", {"model": args.model}, seed=0)
    print(f"first load (reads the GGUF, writes the copy): {time.perf_counter() - start:.1f} s")
    gguf_s, copy_s = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        _from_gguf(directory, gguf, "float32")
        gguf_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        create_policy("hf", {"model": args.model}, seed=0)
        copy_s.append(time.perf_counter() - start)
    g, c = statistics.median(gguf_s), statistics.median(copy_s)
    print(f"from the GGUF file: {g:.2f} s; from the copy: {c:.2f} s (medians of {args.repeats}); "
          f"{g / c:.0f}x")


if __name__ == "__main__":
    main()
