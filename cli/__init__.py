"""The `flywheel` command line: its subcommands, console and progress, and the run log."""
