"""Placeholder: filled in by its issue-26 work."""

from __future__ import annotations


def add_parser(sub) -> None:
    pass


def run(args, console) -> int:
    raise NotImplementedError
