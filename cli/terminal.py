"""The screen, or a pipe: the rich Console each command prints on, and a quiet end on a closed pipe.

On a terminal rich fits output to its width. Into a pipe or a file there is no width to fit, and
rich's default of 80 columns would split one diagnostic over two lines (so `grep line` finds half
of it): there every line is printed whole. A reader that stops early (`flywheel ... | head`) ends
the command quietly, as `head` expects of any Unix tool, not with a BrokenPipe traceback.
"""

from __future__ import annotations

import argparse

import os
import sys
from collections.abc import Callable

from rich.console import Console

PIPE_WIDTH = 10_000     # wide enough that nothing wraps; tables still size to their content
SIGPIPE_STATUS = 141    # 128 + SIGPIPE: what a C tool's shell status is when its reader left


def console_for(stderr: bool = False) -> Console:
    """A Console on stdout (or stderr) that wraps only on a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True)


def log_console(file) -> Console:
    """A Console that writes plain, unwrapped text to `file` (a run's log)."""
    return Console(file=file, width=PIPE_WIDTH, soft_wrap=True, no_color=True,
                   force_terminal=False, force_interactive=False, highlight=False)


def quiet_on_closed_pipe(command: Callable[[], int]) -> int:
    """Run `command`; if its reader closed stdout, end with status 141 and no traceback."""
    try:
        return command()
    except BrokenPipeError:
        # Python flushes stdout again at exit and would report the same error there: point the
        # descriptor at /dev/null first (the recipe of Python's `signal` documentation).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        try:
            sys.stderr.flush()
        except OSError:  # `2>&1 | head`: stderr was the same pipe
            os.dup2(devnull, sys.stderr.fileno())
        return SIGPIPE_STATUS


def help_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's help, wrapped only on a terminal: in a pipe each option's help is one line
    (a wrap would also split names such as unsafe-subprocess at the hyphen)."""
    return argparse.HelpFormatter(prog, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def tell_settings_error(console: Console, error: Exception) -> int:
    """A mistake in the settings, one `error:` line per line of its message; the exit status 2."""
    from rich.markup import escape
    for line in str(error.args[0] if isinstance(error, KeyError) else error).splitlines():
        console.print(f"[red]error:[/] {escape(line)}", highlight=False)
    return 2


def warn_old_flags(options) -> None:
    """One warning on stderr per old flag the command line used, naming its `--set` form (the old
    flags have one release left)."""
    from rich.markup import escape

    from flywheel.loop.options import FlywheelOptions
    for line in options.view_as(FlywheelOptions).deprecated():
        console_for(stderr=True).print(f"[yellow]warning:[/] {escape(line)}", highlight=False)
