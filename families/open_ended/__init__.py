"""The open_ended family: your tasks that no program can verify; people review them
(`human_review`, part of the verifier framework)."""
