"""The repository family: codebases with a problem statement, tools, and tests that run for real
(`repo_bugs`, `repo`, `repo_terminal`): snapshots, the sandbox harness (harnesses/repo.py and
its siblings), the `repo_tests` verifier, the SWE-bench task format."""
