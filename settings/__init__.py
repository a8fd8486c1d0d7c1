"""A run's settings and where it lives, below every room that reads them: the run config
(`config.py`, its KEY=VALUE items `option_items.py`) and the run layout (`layout.py`). The
pipelines, the iteration loop, the feedback side and the reports all read these; none of them is
imported here, so no two rooms import each other through them."""
