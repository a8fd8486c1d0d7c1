import flywheel.transforms.attempt_coder  # noqa: F401  Beam encodes every Attempt with it
