"""The sandbox flags, defined once: which backend, and its KEY=VALUE options.

`flywheel sandbox exec|serve` name the backend `--backend`, `flywheel verify` `--sandbox` (as
`flywheel run` does); both take `--sandbox-options`, parsed by one function. Standard library
and the sandbox package only: these commands start without importing Beam or torch.
"""

from __future__ import annotations

import argparse

from flywheel.settings.option_items import parse_options, split_items
from flywheel.sandbox import BACKENDS


def add_sandbox_flags(parser: argparse.ArgumentParser, flag: str = "--sandbox") -> None:
    """`flag` (the backend, default local) and --sandbox-options on `parser`."""
    parser.add_argument(flag, default="local",
                        help=BACKENDS.help("sandbox backend") + "; default: %(default)s")
    parser.add_argument("--sandbox-options", default="",
                        help="comma-separated KEY=VALUE backend options, e.g. warm=false or "
                             "runtime=runsc; quote a value that holds commas: KEY=\"a, b\"")


def given_options(args) -> dict:
    """--sandbox-options as the backend's kwargs; ValueError for an item that is not KEY=VALUE."""
    return parse_options(split_items(args.sandbox_options, "--sandbox-options"), "--sandbox-options")
