"""The bounded HTTP kit: a token-gated, bounded server, its origin rule, token files and limits;
what the sandbox service, `flywheel serve` and the review page share. Imports nothing of Flywheel."""
