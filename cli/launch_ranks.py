"""A command run again in N data-parallel processes (torchrun, standalone on this machine).

    launch(argv, processes)             # `flywheel sft ... --processes 2` calls it
    python -m flywheel.cli.launch_ranks # what each rank runs: the command, from the environment

The command's words travel in FLYWHEEL_RANK_ARGV (JSON), not on torchrun's command line:
torchrun's own parser takes an abbreviation of its options anywhere in it (`--n 16` would be
read as its `--nnodes`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ENV = "FLYWHEEL_RANK_ARGV"


def launch(argv: list[str], processes: int, drop: str = "--processes") -> int:
    """Run `flywheel ARGV` (without `drop` and its value) in `processes` ranks; their status."""
    kept, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == drop:
            skip = True
        elif not word.startswith(drop + "="):
            kept.append(word)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={processes}", "-m", "flywheel.cli.launch_ranks"]
    return subprocess.run(command, env={**os.environ, ENV: json.dumps(kept)}, check=False).returncode


if __name__ == "__main__":
    from flywheel.cli.main import main
    sys.exit(main(json.loads(os.environ[ENV])))
