"""The shell family: a bash script (or episode) over the task's files, scored by the end state
(harnesses/shell.py, the `shell_state` verifier)."""
