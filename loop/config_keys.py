"""Every key of the run config, derived from the config's own dataclasses: `--set` and the reference.

    flywheel run --set train.epochs=4 --set episode.context=cut --set rollout.domains=add,pyexpr

A key is a field of `RunConfig` (settings/config.py): `seed`, `iterations`, and `TABLE.KEY` for each
field of its tables. Its type is the field's annotation, its default the dataclass's, its meaning
the comment beside the field (else the help of the flag that sets it). A new field is a new key
here, with no flag, parser or test of its own to write.

A `--set` value is read as its type reads it from text (an integer, a number, true/false, a
comma-separated list, a KEY=VALUE list whose values may be quoted: settings/option_items.py; a TOML
array `[...]` too) and then checked by the TOML reader's own check (loop/config_file.py), so a
wrong value gets the message a config file gets, naming the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
import tomllib
import types
import typing
from dataclasses import dataclass

from flywheel.settings.config import RunConfig, renamed
from flywheel.loop.config_file import _checked, short_repr
from flywheel.settings.option_items import split_items

NONE_WORDS = ("none", "null")
BOOLEANS = {"true": True, "yes": True, "on": True, "1": True,
            "false": False, "no": False, "off": False, "0": False}


@dataclass(frozen=True)
class ConfigKey:
    dotted: str           # e.g. episode.max_turns
    hint: object          # the field's type annotation
    default: object
    comment: str          # the comment beside the field in its dataclass ("" when none)


def config_keys(klass=RunConfig, prefix: str = "") -> list[ConfigKey]:
    """Every key of `klass` (a config dataclass), tables' keys dotted, in declaration order."""
    hints, comments, instance = typing.get_type_hints(klass), field_comments(klass), klass()
    keys = []
    for f in dataclasses.fields(klass):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            keys += config_keys(hint, f"{prefix}{f.name}.")
        else:
            keys.append(ConfigKey(prefix + f.name, hint, getattr(instance, f.name),
                                  comments.get(f.name, "")))
    return keys


def field_comments(klass) -> dict[str, str]:
    """field name -> the comment beside it in `klass`'s source (comment lines right below a
    field's continue it)."""
    try:
        lines = inspect.getsource(klass).splitlines()
    except (OSError, TypeError):
        return {}
    names = {f.name for f in dataclasses.fields(klass)}
    comments, last = {}, None
    for line in lines:
        field = re.match(r"    (\w+)\s*:[^#]*(?:#\s*(.*))?$", line)
        if field and field.group(1) in names and field.group(1) not in comments:
            last = field.group(1) if field.group(2) else None
            if last:
                comments[last] = field.group(2).strip()
            continue
        more = re.match(r"\s+#\s*(.*)$", line)
        if more and last:
            comments[last] += " " + more.group(1).strip()
        else:
            last = None
    return comments


def key_named(dotted: str) -> ConfigKey:
    """The key `dotted`; ValueError naming the closest for an unknown one, the new home for a
    key that moved."""
    keys = {k.dotted: k for k in config_keys()}
    if dotted in keys:
        return keys[dotted]
    if message := renamed(dotted):
        raise ValueError(message)
    close = difflib.get_close_matches(dotted, list(keys), n=1)
    raise ValueError(f"unknown key `{dotted}`" + (f" (did you mean `{close[0]}`?)" if close else
                                                  "; see docs/CONFIG.md for every key"))


def parse_set(item: str) -> tuple[str, object]:
    """'section.key=value' -> (the key, its value as the field takes it); ValueError naming the
    key (as the TOML reader does) when the key or the value is not one the config has."""
    dotted, sep, text = item.partition("=")
    dotted = dotted.strip()
    if not sep or not dotted:
        raise ValueError(f"--set {item!r}: expected SECTION.KEY=VALUE, e.g. train.lr=1e-4")
    key = key_named(dotted)
    value = from_text(text, key.hint, dotted)
    if value is None and type(None) in typing.get_args(key.hint):
        return dotted, None  # unset: an optional key's own default (a file leaves it out)
    try:
        return dotted, _checked(value, key.hint)
    except TypeError as e:
        raise ValueError(f"`{dotted}` {e}, got {short_repr(value)}") from None


def from_text(text: str, hint, dotted: str = ""):
    """`text` read as a value of type `hint` (left as text where it cannot be: the check after
    says what was expected)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and text.strip().lower() in (*NONE_WORDS, ""):
            return None
        return from_text(text, next(a for a in args if a is not type(None)), dotted)
    if origin is tuple:
        if text.strip().startswith("["):  # a TOML array, as the file would hold it
            try:
                return tomllib.loads(f"v = {text}")["v"]
            except tomllib.TOMLDecodeError:
                return text
        items = split_items(text, f"--set {dotted}") if dotted.endswith("options") else \
            [x for x in text.split(",") if x]
        types_ = [args[0]] * len(items) if args[-1] is Ellipsis else [*args, *[str] * len(items)]
        return [from_text(x, t, dotted) for x, t in zip(items, types_)]
    try:
        if hint is int:
            return int(text)
        if hint is float:
            return float(text)
    except ValueError:
        return text
    if hint is bool:
        return BOOLEANS.get(text.strip().lower(), text)
    return text
