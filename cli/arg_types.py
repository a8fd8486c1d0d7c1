"""argparse types for counts and sizes: a value out of range is refused where it is parsed, with
the flag's name (argparse adds it), instead of being silently raised to 1 or failing later."""

from __future__ import annotations

import argparse


def _number(kind, lowest, text: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                         f"got {text!r}") from None
    if value < lowest or value != value:  # NaN is below nothing and above nothing
        raise argparse.ArgumentTypeError(f"must be at least {lowest}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A count of things (workers, samples, rows): 1 or more."""
    return _number(int, 1, text)


def nonnegative_int(text: str) -> int:
    """0 or more: a port (0 picks a free one), a size where 0 means off, an iteration."""
    return _number(int, 0, text)


def positive_float(text: str) -> float:
    """Seconds of a limit or wait: more than 0 (0.001 is the least accepted)."""
    return _number(float, 0.001, text)
