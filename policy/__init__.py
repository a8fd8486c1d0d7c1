"""The model side: the Policy protocol and its backends, checkpoints, rollout engines, and the
device a process runs on. Rollout, serving and training import it; it imports none of them."""
