"""The iteration loop: the driver and its overlapped form, the steps of one iteration they share,
the warm start, the steering plan, the run config (its file, flags and options), the run layout,
top-ups, the per-domain watch, preflight checks and the run's sandbox choice."""
