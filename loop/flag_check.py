"""Unknown arguments of `flywheel run`: each one an error naming it and the closest known flag.

Beam's own parser keeps what it does not know and only logs "Discarding unparseable args", so a
mistyped `--confg x` would start the whole default job. Here every argument must be a Flywheel
flag or an option of some Beam `PipelineOptions` class (the same classes, found the same way, as
`PipelineOptions.get_all_options` parses), checked before anything starts.
"""

from __future__ import annotations

import difflib


def _parser():
    """One parser holding every known pipeline option, Flywheel's included."""
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

    import flywheel.loop.options  # noqa: F401  (FlywheelOptions joins the subclasses)
    class Parser(_BeamArgumentParser):
        def error(self, message):  # a message for the caller, not Beam's whole usage and exit
            raise ValueError(message)

    parser = Parser(allow_abbrev=False, add_help=False)
    classes: dict[str, type] = {}
    for cls in PipelineOptions.__subclasses__():  # as get_all_options: the last duplicate wins
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)
    return parser


def known_flags() -> list[str]:
    return sorted({s for action in _parser()._actions for s in action.option_strings})


def unknown_arguments(argv: list[str]) -> list[str]:
    """One message per argument no known option takes ("unknown flag --confg; did you mean
    --config?"); an unknown flag's value is not reported again."""
    parser = _parser()
    try:
        _, unknown = parser.parse_known_args(argv)
    except ValueError as e:  # e.g. "argument --dry_run: expected one argument"
        return [str(e)]
    known = sorted({s for action in parser._actions for s in action.option_strings})
    messages, after_unknown_flag = [], False
    for arg in unknown:
        if arg.startswith("-") and arg != "-":
            name = arg.split("=", 1)[0]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            messages.append(f"unknown flag {name}" + (f"; did you mean {close[0]}?" if close else
                                                      "; see flywheel run --help"))
            after_unknown_flag = "=" not in arg
        elif after_unknown_flag:
            after_unknown_flag = False  # the unknown flag's value
        else:
            messages.append(f"unexpected argument {arg!r}: flywheel run takes flags only")
    return messages
