"""The reasoning_gym family: every dataset of the `reasoning-gym` package as a domain `rg_<name>`,
scored by the dataset's own `score_answer`."""
