"""The small built-in domains the tiny policy learns on CPU (add, digitsum, interval, reverse,
pyexpr) and their verifiers (exact and numeric match, python_output, digit_sum, in_range)."""
