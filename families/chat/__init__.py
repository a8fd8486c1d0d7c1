"""The chat family: tasks phrased for an instruct model (arithmetic, code, reply formats), the
`format_rules` verifier."""
