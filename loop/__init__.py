"""The iteration loop: the driver and its overlapped form, the steps of one iteration they share,
the warm start, the config's file, keys, flags and options (the config itself and the run layout
are in settings/, the steering plan in pipelines/), top-ups, the per-domain watch, preflight
checks and the run's sandbox choice."""
