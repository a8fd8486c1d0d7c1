"""The regex family: text-to-regex tasks. A description and strings that must and must not match;
the response is a regular expression, checked against them (and hidden ones) by `regex_match`
with a linear-time matcher (matcher.py), never Python's backtracking `re`.

The whole family is this folder: the domain (regex.py), the matcher and the verifier
(verifier.py) register themselves when the registries discover `flywheel.families.*`.
"""
