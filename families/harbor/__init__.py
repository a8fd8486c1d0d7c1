"""The harbor family: Harbor task folders (the Terminal-Bench 2.0 format), read on sight and run
as multi-turn terminal episodes with a shell tool, scored by the task's own `tests/test.sh`.

    flywheel tasks validate families/harbor/examples          # solution earns 1, nothing 0
    flywheel run --tasks families/harbor/examples --max-turns 8

A folder holds `instruction.md` (the prompt), `task.toml` (timeouts, resources),
`environment/Dockerfile` (+ its build context), `solution/solve.sh` and `tests/test.sh`, which
writes `/logs/verifier/reward.json` or `reward.txt`. The whole family is this folder:
task_folder.py reads a folder (registered with the shared task-file readers, so a folder of task
folders is a `--tasks` argument), dockerfile.py decides what the environment needs, harbor.py is
the domain, harnesses/harbor.py runs inside the sandbox, verifier.py turns the reward file into a
reward, images.py builds a task's image offline, task_checks.py is what `tasks validate` runs.
"""
