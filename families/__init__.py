"""Task families: one package per family (repository, render, documents, python, sql, math,
shell, builtins, reasoning_gym, chat, structured, open_ended, ...), each holding its domains,
tools, sandbox harnesses (`harnesses/`, shipped into the sandbox as files, never imported here),
verifiers, task formats and data together.

Every public module of every family package is imported when a registry (domains, verifiers,
task formats) first misses (`flywheel.registry`: the home `flywheel.families.*`), so a family
registers its own entries and adding one is one folder. Families build on the shared API
(`flywheel.domains`) and the verifier framework (`flywheel.verifiers`); those never import a
family.
"""
