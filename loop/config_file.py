"""`flywheel run --config run.toml`: every run setting in a file people version and diff.

A `.yaml`/`.yml` file holds the same keys, nested as YAML mappings.

    seed = 0
    iterations = 6
    run_dir = "runs/demo"            # optional; --run-dir overrides it

    [rollout]
    domains = ["add", "pyexpr"]
    n_samples = 8

    [train]
    lr = 5e-4

    [algorithm]                      # how rewards become advantages, and the loss
    advantage = "grpo"
    credit = "outcome"

    [steering]                       # how attempts are spread over domains and tasks
    sampler = "curriculum"
    weights = ["add=2"]
    floor = 0.05

    [overlap]                        # rollout k+1 while k trains (loop/overlap.py)
    max_staleness = 1

    [review]                         # people label attempts (flywheel review serve)
    domains = ["open_ended"]
    audit_share = 0.05

    [beam]                           # any Beam pipeline option, by its name
    direct_running_mode = "multi_processing"
    direct_num_workers = 2

The tables and keys are exactly `RunConfig`'s (settings/config.py); a key it does not have, or a
value of the wrong type, is an error naming the key, the file and its line, before anything runs.
A key that moved (`config.RENAMED_KEYS`: `train.loss` to `[algorithm]`, `rollout.max_turns` to
`[episode]`) is an error naming its new home.
Flags given beside the file override it. `config_toml` writes the effective config back as TOML
(`--print-config`), which this module reads again unchanged.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import reprlib
import tomllib
import types
import typing
from dataclasses import dataclass

from flywheel.settings.config import RunConfig, renamed

FILE_ONLY_KEYS = ("run_dir",)
BEAM_TABLE = "beam"


class ConfigFileError(ValueError):
    """A config file that cannot be used; the message names the file, line and key."""


@dataclass(frozen=True)
class ConfigFile:
    values: dict          # RunConfig.to_dict() with the file's settings over the defaults
    keys: set[str]        # the dotted keys the file sets (a resumed run checks them)
    run_dir: str | None
    beam_args: list[str]  # the [beam] table as command-line flags, placed before the user's own
    path: str = ""
    lines: dict = dataclasses.field(default_factory=dict)  # dotted key -> its line in the file

    def located(self, error: Exception) -> str:
        """A value check's message (ValueError/KeyError of `run_config`, which knows no file)
        with the file, and the line and key it is about where the message names a key this
        file sets ("unknown loss 'x'" is about `algorithm.loss`)."""
        message = str(error.args[0] if isinstance(error, KeyError) and error.args else error)
        key = _named_key(message, self.keys)
        if key is None:
            return f"{self.path}: {short_text(message)}"
        line = self.lines.get(key)
        return f"{self.path}: {f'line {line}: ' if line else ''}`{key}`: {short_text(message)}"


def _named_key(message: str, keys: set[str]) -> str | None:
    """The key of `keys` that `message` names (dotted, as its flag, or by its last part as a
    word), the longest such name first; None when it names none."""
    names = sorted(((name, key) for key in keys for name in
                    (key, "--" + key.split(".")[-1].replace("_", "-"), key.split(".")[-1])),
                   key=lambda pair: -len(pair[0]))
    for name, key in names:
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", message):
            return key
    return None


def short_text(value, limit: int = 300) -> str:
    """`value` (text) cut to `limit` characters, marked: a message quotes what a file holds."""
    value = str(value)
    return value if len(value) <= limit else value[:limit - 20] + f"... ({len(value)} characters)"


def short_repr(value) -> str:
    """repr of a value from a file, bounded in length and depth (a YAML file's aliases can make
    a structure whose full repr is exponentially long)."""
    return _REPR.repr(value)


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4
_REPR.maxlevel = 2


def read_config_file(path: str) -> ConfigFile:
    """Parse and check `path` (any Beam filesystem); ConfigFileError on any problem."""
    from apache_beam.io.filesystems import FileSystems
    try:
        with FileSystems.open(path) as f:
            text = f.read().decode("utf-8-sig")  # a BOM some editors write is not a setting
    except Exception as e:  # OSError, UnicodeDecodeError, each filesystem's own IOErrors
        raise ConfigFileError(f"{path}: cannot read the config file: {e}") from e
    if path.endswith((".yaml", ".yml")):
        data, lines = _read_yaml(path, text)
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigFileError(f"{path}: not valid TOML: {e}") from e
        lines = _key_lines(text)

    def fail(dotted: str, problem: str):
        line = lines.get(dotted)
        return ConfigFileError(f"{path}: {f'line {line}: ' if line else ''}{problem}")

    run_dir = data.pop("run_dir", None)
    if run_dir is not None and not isinstance(run_dir, str):
        raise fail("run_dir", f"`run_dir` must be a string, got {short_repr(run_dir)}")
    beam = data.pop(BEAM_TABLE, {})
    if not isinstance(beam, dict):
        raise fail(BEAM_TABLE, f"`{BEAM_TABLE}` must be a table of Beam pipeline options")
    values, keys = RunConfig().to_dict(), set()
    _merge(RunConfig, data, values, keys, "", fail)
    return ConfigFile(values, keys, run_dir, _beam_args(beam, fail), path, lines)


def _merge(klass, data: dict, into: dict, keys: set[str], prefix: str, fail) -> None:
    hints = typing.get_type_hints(klass)
    names = [f.name for f in dataclasses.fields(klass)]
    for name, value in data.items():
        if not isinstance(name, str):  # a YAML key may be a number, null or a list
            raise fail(prefix + str(name), f"key {short_repr(name)}{f' in [{prefix[:-1]}]' if prefix else ''}"
                       " is not a name; keys are words like `n_samples`")
        dotted = prefix + name
        if name not in names and (message := renamed(dotted)):
            raise fail(dotted, message)
        if name not in names:
            known = names + (list(FILE_ONLY_KEYS) + [BEAM_TABLE] if not prefix else [])
            close = difflib.get_close_matches(name, known, n=1)
            where = f"[{prefix.rstrip('.')}]" if prefix else "the top level"
            raise fail(dotted, f"unknown key `{dotted}`" + (f" (did you mean `{prefix}{close[0]}`?)"
                       if close else f"; {where} takes {', '.join(known)}"))
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                raise fail(dotted, f"`{dotted}` must be a table ([{dotted}])")
            _merge(hint, value, into[name], keys, dotted + ".", fail)
            continue
        try:
            into[name] = _checked(value, hint)
        except TypeError as e:
            raise fail(dotted, f"`{dotted}` {e}, got {short_repr(value)}") from None
        keys.add(dotted)


def _checked(value, hint):
    """`value` as a field of type `hint` takes it (lists become tuples); TypeError if it cannot."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _checked(value, next(a for a in args if a is not type(None)))
    if origin is tuple:
        if not isinstance(value, list):
            raise TypeError(f"must be an array of {_name(args[0])}")
        if args[-1] is Ellipsis:
            if not all(isinstance(v, (str, int, float, bool)) for v in value):  # no nesting
                raise TypeError(f"must be an array of {_name(args[0])}")
            return tuple(_checked(v, args[0]) for v in value)
        if len(value) != len(args):
            raise TypeError(f"must be an array of {len(args)} values")
        return tuple(_checked(v, a) for v, a in zip(value, args))
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint in (str, bool) and isinstance(value, hint):
        return value
    raise TypeError(f"must be {_name(hint)}")


def _name(hint) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
        hint, str(hint))


def _beam_args(beam: dict, fail) -> list[str]:
    """The [beam] table as flags; a name no Beam option has is an error naming the closest."""
    from flywheel.loop.flag_check import known_flags, unknown_arguments
    known = {f.lstrip("-") for f in known_flags() if f.startswith("--")}
    args = []
    for name, value in beam.items():
        if not isinstance(name, str):
            raise fail(f"{BEAM_TABLE}.{name}", f"key {short_repr(name)} in [{BEAM_TABLE}] is not a name")
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            raise fail(f"{BEAM_TABLE}.{name}", f"unknown key `{BEAM_TABLE}.{name}`: not a Beam "
                       "pipeline option" + (f" (did you mean `{close[0]}`?)" if close else ""))
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(item, (str, int, float)) for item in items):
            raise fail(f"{BEAM_TABLE}.{name}", f"`{BEAM_TABLE}.{name}` must be a string, number, true "
                       f"or false (or an array of them), got {short_repr(value)}")
        flags = [f"--{name}" if item is True else f"--{name}={item}"
                 for item in items if item is not False]
        wrong = unknown_arguments(flags)  # Beam's own parser: a value its option does not take
        if wrong:
            said = wrong[0] if len(wrong[0]) <= 200 else wrong[0][:200] + "..."  # it quotes the value
            raise fail(f"{BEAM_TABLE}.{name}", f"`{BEAM_TABLE}.{name}` = {short_repr(value)}: {said}")
        args += flags
    return args


def _key_lines(text: str) -> dict[str, int]:
    """Dotted key -> line number, for messages (plain `key = ...` lines under `[table]` headers)."""
    lines, table = {}, ""
    for number, line in enumerate(text.split("\n"), start=1):  # TOML's lines end at \n only
        if header := re.match(r"\s*\[\s*([A-Za-z0-9_.\s-]+?)\s*\]", line):
            table = header.group(1).replace(" ", "") + "."
            lines.setdefault(table.rstrip("."), number)
        elif key := re.match(r"\s*([A-Za-z0-9_.\s-]+?)\s*=", line):  # `a = 1`, `a.b = 1`
            lines.setdefault(table + key.group(1).replace(" ", ""), number)
    return lines


def _read_yaml(path: str, text: str) -> tuple[dict, dict[str, int]]:
    """(the settings, dotted key -> line) of a YAML config, whose keys are the TOML file's."""
    import yaml

    class Loader(yaml.SafeLoader):
        """YAML 1.1 reads `5e-4` as a string; here it is the number a config means."""

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(
        r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[0-9][0-9_]*[eE][-+]?[0-9]+"
        r"|\.[0-9_]+(?:[eE][-+]?[0-9]+)?|\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
        list("-+0123456789."))
    try:
        data, root = yaml.load(text, Loader=Loader), yaml.compose(text, Loader=Loader)
    except yaml.YAMLError as e:
        raise ConfigFileError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from e
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    lines: dict[str, int] = {}

    def walk(node, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                lines.setdefault(prefix + str(key.value), key.start_mark.line + 1)
                walk(value, f"{prefix}{key.value}.")
    walk(root, "")
    return data, lines


def config_toml(values: dict, run_dir: str | None = None, beam: dict | None = None) -> str:
    """The effective config as TOML: scalars first, then one table per concern. Unset optional
    settings (None) are left out, as a file leaves them out."""
    out = [f"run_dir = {json.dumps(run_dir)}"] if run_dir else []
    tables = {k: v for k, v in values.items() if isinstance(v, dict)}
    out += [f"{k} = {_toml_value(v)}" for k, v in values.items() if k not in tables and v is not None]
    for name, table in [*tables.items(), *([(BEAM_TABLE, beam)] if beam else [])]:
        out += ["", f"[{name}]"]
        out += [f"{k} = {_toml_value(v)}" for k, v in table.items() if v is not None]
    return "\n".join(out) + "\n"


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(value), repr(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string
