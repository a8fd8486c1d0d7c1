"""The python family: HumanEval/MBPP unit-test tasks (harnesses/pytests.py, the `python_tests`
verifier, both task formats, the shipped data/) and `fix_function` (`function_points`)."""
