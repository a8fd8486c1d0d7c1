"""Steering: how an iteration's training attempts are spread over domains and tasks.

Pure code (no Beam, no torch): budgets (`budgets.py`), what earlier iterations tell about each
task, read with SQL from the run's tables (`history.py`), and the samplers that choose among
candidate tasks (`samplers.py`, a registry). transforms/sample_by_budget.py runs them in Beam.
"""
